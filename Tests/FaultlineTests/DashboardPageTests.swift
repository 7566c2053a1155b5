@testable import Faultline
import FaultlineCore
import Testing

/// The dashboard page's two forms and the negotiation at `/__faultline/`, without a server (the page in a browser:
/// Tests/Python/test_dashboard.py; the endpoint: Tests/Python/test_events.py).
@Suite struct DashboardPageTests {
    @Test func aBrowserAsksForHTMLAndCurlDoesNot() {
        #expect(DashboardPage.wantsHTML("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"))
        #expect(DashboardPage.wantsHTML("TEXT/HTML"))
        #expect(DashboardPage.wantsHTML("application/json, text/html;q=0.1"))
        #expect(!DashboardPage.wantsHTML(nil))
        #expect(!DashboardPage.wantsHTML("*/*"))
        #expect(!DashboardPage.wantsHTML("application/json"))
        #expect(!DashboardPage.wantsHTML("text/html;q=0, application/json"))
        #expect(!DashboardPage.wantsHTML("text/html ; q=0.0"))
    }

    @Test func theServedPageLinksItsAssetsAndInlinesNothing() {
        let page = String(decoding: DashboardPage.served, as: UTF8.self)
        #expect(page.contains(#"<script src="/__faultline/ui/dashboard.js"></script>"#))
        #expect(page.contains(#"href="/__faultline/ui/dashboard.css""#))
        #expect(!page.contains("<!--faultline:"), "every slot is filled")
        #expect(!page.contains("faultline-data"))
        #expect(!page.contains("<style"))
    }

    @Test func theSelfContainedFileEmbedsDataThatCannotEndItsElement() throws {
        let hostile = JSONValue.object([("body", .string("</script><script>alert(1)</script><!--"))])
        let file = DashboardPage.selfContained(data: hostile)
        #expect(file.hasPrefix("<!doctype html>"))
        #expect(file.contains(#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'"#))
        #expect(!file.contains("<!--faultline:"))
        #expect(!file.contains("/__faultline/ui/"), "nothing is fetched from a server")
        let start = try #require(file.range(of: #"<script type="application/json" id="faultline-data">"#))
        let end = try #require(file[start.upperBound...].range(of: "</script>"))
        let embedded = String(file[start.upperBound..<end.lowerBound])
        #expect(!embedded.contains("<"))
        #expect(try JSONValue.parse(Array(embedded.utf8)) == hostile, "the escapes are JSON's own: the data reads back")
        let script = String(decoding: PackageResources.dashboard_js, as: UTF8.self)
        #expect(!script.contains("</script"), "the inlined script cannot end its element early")
        #expect(!String(decoding: PackageResources.dashboard_css, as: UTF8.self).contains("</style"))
    }
}
