/// A route that can never match: an earlier route takes every request it would. The engine tries routes in load
/// order — the scenarios as loaded, each one's routes as written — and the first match plays, so a later route
/// whose requests are all taken earlier is dead code in the scenario files (`validate` and `serve` warn).
package struct ShadowedRoute: Sendable, Equatable, CustomStringConvertible {
    /// The route that can never match, and its scenario file.
    package var route: String
    package var file: String
    /// The earlier route that takes its requests, and its scenario file.
    package var shadowingRoute: String
    package var shadowingFile: String

    package init(route: String, file: String, shadowingRoute: String, shadowingFile: String) {
        self.route = route
        self.file = file
        self.shadowingRoute = shadowingRoute
        self.shadowingFile = shadowingFile
    }

    /// `warning: route "b" (shop.json) can never match: route "a" (catalogue.json) matches every request it would`.
    package var description: String {
        "warning: route \(ScenarioLoader.quoted(route)) (\(file)) can never match: route "
            + "\(ScenarioLoader.quoted(shadowingRoute)) "
            + "(\(shadowingFile)) matches every request it would"
    }
}

package enum RouteShadowing {
    /// Every route that an earlier one (in `scenarios` order, then route order, as the engine tries them) certainly
    /// shadows, each named with the first route that does. Conservative: only reported when it is certain from
    /// the `match` alone — the earlier route has no query, header or body condition (which could make it miss),
    /// its methods include all of the later's, and its path template takes every path the later's does. What
    /// happens after a match (`protocols`, `sequenceBy`, chaos, the script) never passes the request on to a
    /// later route, so it does not matter here.
    package static func shadowedRoutes(in scenarios: [Scenario]) -> [ShadowedRoute] {
        let routes = scenarios.flatMap { scenario in scenario.routes.map { (route: $0, file: scenario.sourceFile) } }
        var found: [ShadowedRoute] = []
        for (index, later) in routes.enumerated() {
            guard let earlier = routes[..<index].first(where: { covers($0.route.match, later.route.match) }) else {
                continue
            }
            found.append(ShadowedRoute(
                route: later.route.id, file: later.file, shadowingRoute: earlier.route.id, shadowingFile: earlier.file))
        }
        return found
    }

    /// Whether every request `later` takes is taken by `earlier` too.
    package static func covers(_ earlier: RouteMatch, _ later: RouteMatch) -> Bool {
        guard earlier.query.isEmpty, earlier.headers.isEmpty, earlier.body == nil else { return false }
        if !earlier.methods.isEmpty {
            guard !later.methods.isEmpty, Set(later.methods).isSubset(of: Set(earlier.methods)) else { return false }
        }
        guard let earlierPath = earlier.path else { return true }
        guard let laterPath = later.path else { return false }
        return covers(earlierPath, laterPath)
    }

    /// Whether every path `later` matches, `earlier` matches too: segment by segment, a literal covers only the
    /// same literal and a `{param}` covers any segment but an empty one; an exact template only an exact one of
    /// the same length, a prefix any template at least as long.
    package static func covers(_ earlier: PathPattern, _ later: PathPattern) -> Bool {
        // As RouteMatcher reads them: a prefix's trailing empty segment ("/v1/") is not a requirement.
        func required(_ pattern: PathPattern) -> [PathPattern.Segment] {
            var segments = pattern.segments
            if pattern.isPrefix, case .literal("")? = segments.last { segments.removeLast() }
            return segments
        }
        let wanted = required(earlier)
        let given = required(later)
        if earlier.isPrefix {
            guard given.count >= wanted.count else { return false }
        } else {
            guard !later.isPrefix, given.count == wanted.count else { return false }
        }
        for (segment, other) in zip(wanted, given) {
            switch (segment, other) {
            case (.literal(let a), .literal(let b)):
                guard a == b else { return false }
            case (.parameter, .literal(let b)):
                guard !b.isEmpty else { return false }
            case (.parameter, .parameter):
                continue
            case (.literal, .parameter):
                return false
            }
        }
        return true
    }
}
