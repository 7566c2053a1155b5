@testable import Faultline
import Testing

/// `ConnectionLimit`: what a new connection gets, and the default derived from the descriptor limit. The
/// end-to-end behaviour (503s, refusals, EMFILE) is Tests/Python/test_connection_limit.py.
@Suite struct ConnectionLimitTests {
    @Test func theLimitThenTheOverflowThenRefusals() {
        let limit = ConnectionLimit(configured: 4, descriptorLimit: 1024)
        #expect((0..<4).map(limit.admit) == Array(repeating: .within, count: 4))
        #expect((4..<(4 + ConnectionLimit.overflow)).allSatisfy { limit.admit(open: $0) == .pastLimit })
        #expect(limit.admit(open: 4 + ConnectionLimit.overflow) == .refused)
    }

    @Test func theDefaultLeavesTheReserveAndTheOverflowBelowTheDescriptorLimit() {
        #expect(ConnectionLimit(configured: nil, descriptorLimit: 1024).limit == 1024 - 64 - 32)
        #expect(ConnectionLimit(configured: nil, descriptorLimit: 20).limit == 16, "never below 16")
        #expect(ConnectionLimit(configured: nil, descriptorLimit: nil).limit == 1_000_000, "unlimited")
        #expect(ConnectionLimit(configured: 50_000, descriptorLimit: 1024).limit == 50_000, "the option wins")
    }

    @Test func aLimitAboveTheDescriptorsIsWarnedAbout() {
        #expect(ConnectionLimit.warning(configured: nil, descriptorLimit: 1024) == nil)
        #expect(ConnectionLimit.warning(configured: 928, descriptorLimit: 1024) == nil)
        let warning = ConnectionLimit.warning(configured: 1000, descriptorLimit: 1024)
        #expect(warning?.hasPrefix("--max-connections 1000 leaves fewer than 64 of the 1024 descriptors") == true)
    }
}
