import FaultlineCore

/// The dashboard's page (ARCHITECTURE §7 "The dashboard"): one HTML template, one script and one style sheet, all
/// compiled into the binary (`PackageResources`), in two forms.
/// - **Served** at `GET /__faultline/` to a browser: the template links `/__faultline/ui/dashboard.js` and
///   `.css`; the script reads the admin API live. The page's `Content-Security-Policy` (a header) allows nothing
///   but this origin's own scripts, styles, images and API calls.
/// - **Self-contained** (`faultline export --format html`, `faultline verify --html`): the script, style and icon
///   inlined and the data embedded as `<script type="application/json" id="faultline-data">`; a `<meta>` policy
///   forbids every network request, so the file opened from `file://` shows the run it was written from.
/// The script tells the two apart by that data element. The template's slots are HTML comments
/// (`<!--faultline:NAME-->`), filled here and nowhere else.
package enum DashboardPage {
    /// The served page's policy: this origin only, nothing inline, no frames.
    package static let servedPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        + "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// The self-contained file's policy: its own inline script and style, images from `data:`, no network at all.
    package static let fileCSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        + "img-src data:; base-uri 'none'; form-action 'none'"

    /// The page a browser gets at `/__faultline/`, built once.
    package static let served: [UInt8] = Array(fill([
        "csp": "",
        "icon": #"<link rel="icon" type="image/svg+xml" href="/__faultline/ui/favicon.svg">"#,
        "style": #"<link rel="stylesheet" href="/__faultline/ui/dashboard.css">"#,
        "data": "",
        "script": #"<script src="/__faultline/ui/dashboard.js"></script>"#,
    ]).utf8)

    /// One HTML file holding the dashboard and `data` (`{"generatedAt", "server", "health", "requests", "report",
    /// "state", "scenarios", "network", "resources"}`, as `faultline export --format html` gathers it).
    package static func selfContained(data: JSONValue) -> String {
        fill([
            "csp": #"<meta http-equiv="Content-Security-Policy" content="\#(fileCSP)">"#,
            "icon": #"<link rel="icon" type="image/svg+xml" href="data:image/svg+xml;base64,\#(Base64.encode(PackageResources.favicon_svg))">"#,
            "style": "<style>\n" + String(decoding: PackageResources.dashboard_css, as: UTF8.self) + "</style>",
            "data": #"<script type="application/json" id="faultline-data">"# + embeddable(data) + "</script>",
            "script": "<script>\n" + String(decoding: PackageResources.dashboard_js, as: UTF8.self) + "</script>",
        ])
    }

    /// JSON that cannot end the `<script>` element holding it: every `<` (only ever inside a string, in JSON)
    /// written as `\u003c`, so neither `</script>` nor `<!--` can appear.
    static func embeddable(_ data: JSONValue) -> String {
        var bytes: [UInt8] = []
        data.serialize(into: &bytes)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 64)
        for byte in bytes {
            if byte == UInt8(ascii: "<") { out += Array(#"\u003c"#.utf8) } else { out.append(byte) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func fill(_ slots: [String: String]) -> String {
        var page = String(decoding: PackageResources.dashboard_html, as: UTF8.self)
        for (name, value) in slots {
            page = page.replacing("<!--faultline:\(name)-->", with: value)
        }
        return page
    }

    /// The served assets under `/__faultline/ui/`: their bytes and media types.
    package static func asset(_ name: String) -> (bytes: [UInt8], contentType: String)? {
        switch name {
        case "dashboard.js": return (PackageResources.dashboard_js, "text/javascript; charset=utf-8")
        case "dashboard.css": return (PackageResources.dashboard_css, "text/css; charset=utf-8")
        case "favicon.svg": return (PackageResources.favicon_svg, "image/svg+xml")
        default: return nil
        }
    }

    /// Whether a request's `Accept` asks for HTML (a browser's navigation), not `*/*` or JSON: `text/html` named
    /// with a non-zero quality.
    package static func wantsHTML(_ accept: String?) -> Bool {
        guard let accept else { return false }
        for range in accept.split(separator: ",") {
            let parts = range.split(separator: ";").map { String($0).trimmingWhitespace() }
            guard let type = parts.first, type.lowercased() == "text/html" || type.lowercased() == "application/xhtml+xml"
            else { continue }
            let quality = parts.dropFirst().first { $0.lowercased().hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            if quality > 0 { return true }
        }
        return false
    }
}
