import Foundation

/// A site's floor plan as the simulator sees it: zone rectangles, doors, and the walls a link crosses.
struct FloorPlan: Sendable {
    let zones: [(id: String, rect: [Double])]
    /// Every x and every y at which some zone has an edge.
    private let edgeXs: [Double]
    private let edgeYs: [Double]
    private let doors: [Set<String>: (x: Double, y: Double)]

    init(_ site: Scenario.Site) {
        zones = site.zones.map { ($0.id, $0.rect) }
        edgeXs = Array(Set(site.zones.flatMap { [$0.rect[0], $0.rect[2]] })).sorted()
        edgeYs = Array(Set(site.zones.flatMap { [$0.rect[1], $0.rect[3]] })).sorted()
        var doors: [Set<String>: (x: Double, y: Double)] = [:]
        for door in site.doors { doors[Set(door.zones)] = (door.at[0], door.at[1]) }
        self.doors = doors
    }

    /// The index of the zone holding the point (the first, where zones touch), or nil outside every zone.
    func zoneIndex(x: Double, y: Double) -> Int? {
        zones.firstIndex { $0.rect[0] <= x && x < $0.rect[2] && $0.rect[1] <= y && y < $0.rect[3] }
    }

    /// How many zone boundaries the straight line between two points crosses (leaving the site counts too): where
    /// the line meets an edge coordinate, the zone on either side is compared.
    func walls(from a: (x: Double, y: Double), to b: (x: Double, y: Double)) -> Int {
        var cuts: [Double] = [0, 1]
        let dx = b.x - a.x
        let dy = b.y - a.y
        if dx != 0 { for x in edgeXs { let t = (x - a.x) / dx; if t > 0 && t < 1 { cuts.append(t) } } }
        if dy != 0 { for y in edgeYs { let t = (y - a.y) / dy; if t > 0 && t < 1 { cuts.append(t) } } }
        guard cuts.count > 2 else { return 0 }
        cuts.sort()
        var crossings = 0
        var previous: Int?? = nil
        for index in 1..<cuts.count where cuts[index] > cuts[index - 1] {
            let middle = (cuts[index] + cuts[index - 1]) / 2
            let zone = zoneIndex(x: a.x + middle * dx, y: a.y + middle * dy)
            if let last = previous, last != zone { crossings += 1 }
            previous = .some(zone)
        }
        return crossings
    }

    /// Where a beacon walking from `a` in zone `from` to `b` in zone `to` crosses between them: their door, or
    /// where the straight line leaves `from`'s rectangle.
    func crossing(from: String, to: String, a: (x: Double, y: Double), b: (x: Double, y: Double)) -> (x: Double, y: Double) {
        if let door = doors[Set([from, to])] { return door }
        guard let rect = zones.first(where: { $0.id == from })?.rect else { return a }
        var exit = 1.0
        let dx = b.x - a.x
        let dy = b.y - a.y
        for (delta, start, low, high) in [(dx, a.x, rect[0], rect[2]), (dy, a.y, rect[1], rect[3])] where delta != 0 {
            let t = ((delta > 0 ? high : low) - start) / delta
            if t >= 0 { exit = min(exit, t) }
        }
        return (a.x + exit * dx, a.y + exit * dy)
    }
}

/// Where a beacon is at any moment of a scenario. Each stop of its path has a spot in its zone (away from the
/// walls by 10 %); between two stops in zones the beacon walks from one spot to the other at `walkingSpeed`, timed
/// so that it crosses into the next zone exactly at that stop's `at_s`.
struct Trajectory: Sendable {
    static let walkingSpeed = 1.2

    private struct Leg: Sendable {
        var zone: String?
        var startSeconds: Double
        var spot: (x: Double, y: Double)
        /// Walking in from the crossing with the previous zone: from where, arriving when.
        var arrival: (from: (x: Double, y: Double), until: Double)?
        /// Walking out to the crossing with the next zone: leaving when, to where (reached at the next start).
        var departure: (from: Double, to: (x: Double, y: Double))?
    }

    private let legs: [Leg]

    init(path: [Scenario.Stop], plan: FloorPlan, random: inout SeededGenerator) {
        var legs: [Leg] = path.map { stop in
            var spot = (x: 0.0, y: 0.0)
            if let zone = stop.zone, let rect = plan.zones.first(where: { $0.id == zone })?.rect {
                spot = (rect[0] + (0.1 + 0.8 * random.unit()) * (rect[2] - rect[0]),
                        rect[1] + (0.1 + 0.8 * random.unit()) * (rect[3] - rect[1]))
            }
            return Leg(zone: stop.zone, startSeconds: stop.atSeconds, spot: spot)
        }
        for index in legs.indices.dropLast() {
            guard let from = legs[index].zone, let to = legs[index + 1].zone else { continue }
            let a = legs[index].spot
            let b = legs[index + 1].spot
            let crossing = from == to ? a : plan.crossing(from: from, to: to, a: a, b: b)
            let outSeconds = hypot(crossing.x - a.x, crossing.y - a.y) / Self.walkingSpeed
            // Leave no earlier than the stop began.
            let leave = max(legs[index].startSeconds, legs[index + 1].startSeconds - outSeconds)
            legs[index].departure = (leave, crossing)
            let inSeconds = hypot(b.x - crossing.x, b.y - crossing.y) / Self.walkingSpeed
            legs[index + 1].arrival = (crossing, legs[index + 1].startSeconds + inSeconds)
        }
        self.legs = legs
    }

    /// The position at `seconds` into the scenario, or nil while away from the site.
    func position(at seconds: Double) -> (x: Double, y: Double)? {
        guard let index = legs.lastIndex(where: { $0.startSeconds <= seconds }), legs[index].zone != nil else { return nil }
        let leg = legs[index]
        if let arrival = leg.arrival, seconds < arrival.until {
            return Self.between(arrival.from, leg.spot, fraction: 1 - (arrival.until - seconds) / (arrival.until - leg.startSeconds))
        }
        if let departure = leg.departure, seconds > departure.from, index + 1 < legs.count {
            let end = legs[index + 1].startSeconds
            return Self.between(leg.spot, departure.to, fraction: (seconds - departure.from) / max(end - departure.from, 1e-9))
        }
        return leg.spot
    }

    private static func between(_ a: (x: Double, y: Double), _ b: (x: Double, y: Double), fraction: Double) -> (x: Double, y: Double) {
        let f = min(max(fraction, 0), 1)
        return (a.x + f * (b.x - a.x), a.y + f * (b.y - a.y))
    }
}

/// The shadowing of one beacon-receiver link: a first-order autoregressive process (an obstacle between beacon and
/// receiver stays for a while), stationary with deviation `sigma` and correlation time `correlationSeconds`.
struct LinkShadowing: Sendable {
    private var value: Double?
    private var lastSeconds = 0.0

    mutating func next(at seconds: Double, sigma: Double, correlationSeconds: Double, random: inout SeededGenerator) -> Double {
        let innovation = random.gaussian()
        guard sigma > 0 else { return 0 }
        guard let previous = value, correlationSeconds > 0 else {
            value = sigma * innovation
            lastSeconds = seconds
            return value!
        }
        let rho = exp(-max(seconds - lastSeconds, 0) / correlationSeconds)
        value = rho * previous + (1 - rho * rho).squareRoot() * sigma * innovation
        lastSeconds = seconds
        return value!
    }
}
