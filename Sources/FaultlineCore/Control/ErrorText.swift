#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file-system error as a sentence for a message: "No such file or directory (/path)". FoundationEssentials has
/// no `localizedDescription` (that is Foundation's, with ICU behind it), so the underlying errno is written the way
/// the C library words it, with the path the operation named.
package func errorText(_ error: any Error) -> String {
    func posix(_ code: Int32) -> String { String(cString: strerror(code)) }
    if let cocoa = error as? CocoaError {
        let path = cocoa.filePath.map { " (\($0))" } ?? ""
        if let underlying = cocoa.underlying as? POSIXError { return posix(underlying.code.rawValue) + path }
        return "file error \(cocoa.code.rawValue)" + path
    }
    if let error = error as? POSIXError { return posix(error.code.rawValue) }
    return "\(error)"
}
