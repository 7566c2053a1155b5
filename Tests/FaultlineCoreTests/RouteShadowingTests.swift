import Testing
@testable import FaultlineCore

/// `RouteShadowing`: a later route that an earlier one certainly takes every request of, and nothing less certain.
@Suite struct RouteShadowingTests {
    /// A scenario named `name` in `file` whose routes are `routes` (id → the `match` object's text).
    static func scenario(_ name: String, file: String, _ routes: [(String, String)]) throws -> Scenario {
        let text = routes.map { #"{"id": "\#($0.0)", "match": \#($0.1), "responses": [{}]}"# }.joined(separator: ", ")
        return try ScenarioTestSupport.load(#"{"name": "\#(name)", "routes": [\#(text)]}"#, file: file)
    }

    /// Whether a route matching `earlier` shadows one matching `later` (two routes of one scenario).
    static func shadows(_ earlier: String, _ later: String) throws -> Bool {
        let found = RouteShadowing.shadowedRoutes(in: [try scenario("s", file: "s.json", [("a", earlier), ("b", later)])])
        return found == [ShadowedRoute(route: "b", file: "s.json", shadowingRoute: "a", shadowingFile: "s.json")]
    }

    @Test func equalTemplatesAndParametersOverLiteralsShadow() throws {
        #expect(try Self.shadows(#"{"method": "GET", "path": "/v1/products/{id}"}"#,
                                 #"{"method": "GET", "path": "/v1/products/{id}"}"#))
        #expect(try Self.shadows(#"{"method": "GET", "path": "/v1/products/{id}"}"#,
                                 #"{"method": "GET", "path": "/v1/products/7"}"#))
        #expect(try Self.shadows(#"{"method": "GET", "path": "/v1/products/{id}"}"#,
                                 #"{"method": "GET", "path": "/v1/products/{sku}", "headers": {"X-A": "1"}}"#))
        // No method means every method; no path every path.
        #expect(try Self.shadows(#"{"path": "/v1/products/{id}"}"#, #"{"method": ["GET", "PUT"], "path": "/v1/products/7"}"#))
        #expect(try Self.shadows(#"{"method": ["GET", "PUT"]}"#, #"{"method": "PUT", "path": "/x"}"#))
        // A prefix takes everything under it.
        #expect(try Self.shadows(#"{"pathPrefix": "/v1/"}"#, #"{"path": "/v1/products/7"}"#))
        #expect(try Self.shadows(#"{"pathPrefix": "/v1/{x}"}"#, #"{"pathPrefix": "/v1/a/b"}"#))
    }

    @Test func anythingLessThanCertainIsNotReported() throws {
        // The later route comes first in its own right, or is not entirely covered.
        #expect(try !Self.shadows(#"{"method": "GET", "path": "/v1/products/7"}"#,
                                  #"{"method": "GET", "path": "/v1/products/{id}"}"#))
        #expect(try !Self.shadows(#"{"method": "GET", "path": "/v1/products/{id}"}"#,
                                  #"{"method": "POST", "path": "/v1/products/{id}"}"#))
        #expect(try !Self.shadows(#"{"method": "GET", "path": "/v1/products/{id}"}"#,
                                  #"{"path": "/v1/products/{id}"}"#))
        #expect(try !Self.shadows(#"{"method": "GET", "path": "/v1/products/{id}"}"#,
                                  #"{"method": "GET", "path": "/v1/products/{id}/reviews"}"#))
        #expect(try !Self.shadows(#"{"path": "/v1/products/{id}"}"#, #"{"pathPrefix": "/v1/products/7"}"#))
        #expect(try !Self.shadows(#"{"path": "/v1/{id}"}"#, #"{"path": "/v1/"}"#), "a parameter never takes an empty segment")
        #expect(try !Self.shadows(#"{"pathPrefix": "/v1/a"}"#, #"{"pathPrefix": "/v1"}"#))
        #expect(try !Self.shadows(#"{"path": "/x"}"#, #"{"method": "GET"}"#))
        // The earlier route has a condition that can make it miss.
        #expect(try !Self.shadows(#"{"path": "/x", "headers": {"X-A": "1"}}"#, #"{"path": "/x"}"#))
        #expect(try !Self.shadows(#"{"path": "/x", "query": {"page": "1"}}"#, #"{"path": "/x"}"#))
        #expect(try !Self.shadows(#"{"path": "/x", "body": {"contains": "a"}}"#, #"{"path": "/x"}"#))
    }

    @Test func acrossScenariosInLoadOrderNamingTheFirstThatShadows() throws {
        let catalogue = try Self.scenario("catalogue", file: "catalogue.json", [
            ("a", #"{"method": "GET", "path": "/v1/products/{id}"}"#),
            ("a2", #"{"method": "GET", "path": "/v1/products/{id}"}"#),
        ])
        let shop = try Self.scenario("shop", file: "shop.json", [("b", #"{"method": "GET", "path": "/v1/products/7"}"#)])
        let found = RouteShadowing.shadowedRoutes(in: [catalogue, shop])
        #expect(found == [
            ShadowedRoute(route: "a2", file: "catalogue.json", shadowingRoute: "a", shadowingFile: "catalogue.json"),
            ShadowedRoute(route: "b", file: "shop.json", shadowingRoute: "a", shadowingFile: "catalogue.json"),
        ])
        #expect(found[1].description
            == #"warning: route "b" (shop.json) can never match: route "a" (catalogue.json) matches every request it would"#)
        // The other way round, the literal route comes first and only a2 is shadowed.
        #expect(RouteShadowing.shadowedRoutes(in: [shop, catalogue]).map(\.route) == ["a2"])
    }
}
