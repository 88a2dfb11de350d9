import Foundation
import LibPQ
import LocalServers
import TestServers
import Testing

/// Headless Chromium from Debian, driven over the DevTools protocol (Tests/Browser/console-browser.py).
struct Browser {
    static let chromium = findExecutable("chromium", extraDirectories: ["/usr/bin"])
    static let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : nil
    static let driver = repositoryRoot + "/Tests/Browser/console-browser.py"
    /// Whether the driver's Python has its websocket module (Debian's python3-websocket).
    static let available: Bool = {
        guard chromium != nil, let python else { return false }
        let process = try? ChildProcess(python, ["-c", "import websocket"], standardErrorPath: "/dev/null")
        return process.map { process in
            while process.isRunning { usleep(10_000) }
            return process.exitCode == 0
        } ?? false
    }()

    enum Step {
        case open(String)
        case wait(String, timeout: Int = 30)
        case eval(String)
        case screenshot(String)

        var json: [String: Any] {
            switch self {
            case .open(let url): ["open": url]
            case .wait(let expression, let timeout): ["wait": expression, "timeout": timeout]
            case .eval(let expression): ["eval": expression]
            case .screenshot(let path): ["screenshot": path]
            }
        }
    }

    /// Runs the steps in one tab; the value of each `eval` and `wait`, in order. Fails with the step that failed.
    static func run(_ steps: [Step]) async throws -> [String] {
        let work = try makeTemporaryDirectory(prefix: "browser")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let plan = work + "/plan.json"
        try JSONSerialization.data(withJSONObject: steps.map(\.json)).write(to: URL(fileURLWithPath: plan))
        let result = try await runProgram(try #require(python), [driver, try #require(chromium), plan])
        var values: [String] = []
        for line in result.output.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            if let error = object["error"] { throw LocalServerError("browser: \(error) (\(object["step"] ?? ""))\n\(result.errors.suffix(1000))") }
            if let value = object["value"] { values.append(value as? String ?? "\(value)") }
        }
        guard result.status == 0 else { throw LocalServerError("browser driver exit \(result.status ?? -1): \(result.errors.suffix(2000))") }
        return values
    }
}

/// Where a test keeps a page's screenshot: `CONSOLE_SCREENSHOTS` (docs/console to make the committed ones again),
/// else a temporary directory.
func screenshotPath(_ name: String, in temporary: String) -> String {
    if let directory = ProcessInfo.processInfo.environment["CONSOLE_SCREENSHOTS"] {
        let absolute = directory.hasPrefix("/") ? directory : repositoryRoot + "/" + directory
        return absolute + "/\(name).png"
    }
    return temporary + "/\(name).png"
}

/// `beaconflow console` as an operator opens it, in a real browser.
@Suite(
    .enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"),
    .enabled(if: Browser.available, "chromium or python3-websocket is not installed"), .timeLimit(.minutes(4)), .serialized)
struct ConsoleBrowserTests {
    static let token = "token-of-the-console-tests"

    /// Known rows in the tables behind the views: two sites (one with a floor plan, one without), three registry
    /// beacons (one with a label that is markup), a beacon just heard and not placed yet, three agents (one offline,
    /// one its site has let go) and one the site awaits.
    static let seed = """
        INSERT INTO beaconflow.site_registry VALUES ('hq', 'UTC', 30, 300), ('depot', 'UTC', 30, 300);
        INSERT INTO beaconflow.zone_registry VALUES
            ('hq', 'lobby', 0, NULL, ARRAY[0, 0, 10, 8]), ('hq', 'lab', 1, 12, ARRAY[10, 0, 20, 8]),
            ('depot', 'dock', 0, NULL, NULL), ('depot', 'yard', 1, 40, NULL);
        INSERT INTO beaconflow.beacon_registry (beacon_id, label, identity_key, bthome_bindkey) VALUES
            ('ibeacon:cart:1:7', 'Cart 7', false, false), ('ibeacon:cart:1:8', '<img src=x onerror=alert(1)>', false, false),
            ('ibeacon:spare:1:1', 'Spare', false, false), ('ibeacon:tag:1:10', 'Tag 10', false, false),
            ('ibeacon:tag:1:9', 'Tag 9', false, false);
        UPDATE beaconflow.beacon_registry SET outdoors = true WHERE beacon_id = 'ibeacon:cart:1:7';
        INSERT INTO beaconflow.night_forecasts VALUES
            ('hq', (now() AT TIME ZONE 'UTC')::date + 1, -20), ('hq', (now() AT TIME ZONE 'UTC')::date + 2, -33.6);
        INSERT INTO beaconflow.beacon_state (beacon_id, site_id, last_seen, battery_mv, temperature_c, status, first_seen,
                est_days_left, days_left_low, days_left_high, replace_by, forecast, coldest_carried_c) VALUES
            ('ibeacon:cart:1:7', 'hq', now() - interval '2 s', 2950, 21.5, 'ok', now() - interval '1 h',
                250, 200, 300, now() + interval '200 days', 'charge_counting', -31.2),
            ('ibeacon:cart:1:8', 'hq', now() - interval '3 s', 2300, NULL, 'low_battery', now() - interval '1 h',
                12, 9, 15, now() + interval '9 days', 'charge_counting', 4.6),
            ('mac:AA:BB:CC:DD:EE:01', 'depot', now() - interval '5 s', NULL, NULL, 'ok', now() - interval '1 h', NULL, NULL, NULL, NULL, NULL, NULL),
            ('mac:AA:BB:CC:DD:EE:02', 'depot', now() - interval '10 min', NULL, NULL, 'ok', now() - interval '1 h', NULL, NULL, NULL, NULL, NULL, NULL),
            ('mac:AA:BB:CC:DD:EE:03', 'depot', now() - interval '1 s', NULL, NULL, 'ok', now() - interval '1 s', NULL, NULL, NULL, NULL, NULL, NULL);
        INSERT INTO beaconflow.visits_raw (site_id, zone_id, beacon_id, enter_ts, exit_ts) VALUES
            ('hq', 'lobby', 'ibeacon:cart:1:7', now() - interval '20 min', NULL),
            ('hq', 'lab', 'ibeacon:cart:1:8', now() - interval '5 min', NULL),
            ('depot', 'yard', 'mac:AA:BB:CC:DD:EE:01', now() - interval '1 min', NULL),
            ('depot', 'dock', 'mac:AA:BB:CC:DD:EE:02', now() - interval '30 min', now() - interval '10 min');
        INSERT INTO beaconflow.agent_state (site_id, agent_id, online, last_batch_at, clock_offset_ms, online_since) VALUES
            ('hq', 'hq-a1', true, now() - interval '1 s', 0, now() - interval '1 h'),
            ('hq', 'hq-a2', false, now() - interval '2 h', 1200, NULL),
            ('depot', 'depot-a1', true, now() - interval '2 s', 0, now() - interval '1 h');
        INSERT INTO beaconflow.agent_zone_state VALUES
            ('hq', 'hq-a1', 'live', now()), ('hq', 'hq-a2', 'let_go', now() - interval '1 h'), ('depot', 'depot-a1', 'live', now()),
            ('depot', 'depot-a2', 'awaited', now());
        INSERT INTO beaconflow.beacon_live_position VALUES
            ('hq', 'ibeacon:cart:1:7', now(), 4.5, 3.25, 1.4, '{"lobby": 0.97, "lab": 0.03}'),
            ('hq', 'ibeacon:spare:1:1', now() - interval '1 h', 15, 4, 2, '{"lab": 1}');
        """

    @Test func everyPageOfASeededDatabaseShowsWhatTheViewsHold() async throws {
        let database = try await PostgresServer.start()
        let work = try makeTemporaryDirectory(prefix: "console-seeded")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let connection = try PostgresConnection(database.conninfo)
        let migrated = try await runProgram(try #require(beaconflowExecutable), ["migrate", "--database", database.conninfo])
        #expect(migrated.status == 0, "\(migrated.errors)")
        try connection.execute(Self.seed)
        let (console, base) = try await startConsoleProcess(database, work: work, token: Self.token)
        defer { console.terminate(SIGTERM) }

        let zones = "[...document.querySelectorAll('[data-zone]')].map(e => e.dataset.zone + '=' + e.dataset.occupants).join(' ')"
        let values = try await Browser.run([
            // Without the token: the sign-in page, and no data.
            .open(base + "/beacons"), .eval("document.querySelector('h1')?.textContent + '|' + document.querySelectorAll('table').length"),
            .open(base + "/login?token=\(Self.token)"), .wait("document.querySelectorAll('[data-zone]').length === 4 ? 'four zones' : ''"),
            .eval(zones), .eval("[...document.querySelectorAll('h2')].map(e => e.textContent).join('|')"),
            .eval(
                "[...document.querySelectorAll('svg.floor')].map(e => e.dataset.site).join() + '|' + document.querySelectorAll('.tile').length + '|' + [...document.querySelectorAll('svg.floor circle.dot')].map(e => e.parentNode.dataset.beacon + '@' + e.getAttribute('cx') + ',' + e.getAttribute('cy')).join()"
            ),
            .screenshot(screenshotPath("sites", in: work)),
            .open(base + "/beacons"), .wait("document.getElementById('beacon-summary')?.textContent"),
            .eval("[...document.querySelectorAll('tr[data-beacon]')].map(r => [...r.cells].slice(0, 5).map(c => c.textContent).join(',')).join('|')"),
            .eval("document.querySelectorAll('img').length + '|' + [...document.querySelectorAll('td.bad')].map(c => c.textContent + ':' + (c.title || '')).join()"),
            .screenshot(screenshotPath("beacons", in: work)),
            // Search and filters, kept while the page updates; ages as a person says them, the time on hover.
            .eval("(() => { const s = document.getElementById('beacon-search'); s.value = 'TAG'; s.dispatchEvent(new Event('input')); return 'typed' })()"),
            .wait("document.getElementById('beacon-summary').textContent.includes('2 shown') && [...document.querySelectorAll('tr[data-beacon]')].map(r => r.cells[0].textContent).join()"),
            .eval("(() => { const s = document.getElementById('beacon-search'); s.value = ''; s.dispatchEvent(new Event('input')); const z = document.getElementById('beacon-status'); z.value = 'low_battery'; z.dispatchEvent(new Event('change')); return [...document.querySelectorAll('tr[data-beacon]')].map(r => r.dataset.beacon).join() })()"),
            .eval("const z = document.getElementById('beacon-status'); z.value = ''; z.dispatchEvent(new Event('change')); const t = document.querySelector('tr[data-beacon=\"ibeacon:cart:1:7\"]').cells[5]; t.textContent + '|' + /^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC$/.test(t.title)"),
            .open(base + "/agents"), .wait("document.getElementById('agent-summary')?.textContent"),
            .eval("[...document.querySelectorAll('tr[data-agent]')].map(r => r.dataset.agent + ':' + r.cells[2].textContent + ':' + r.cells[5].textContent).join('|')"),
            .screenshot(screenshotPath("agents", in: work)),
            .open(base + "/pipeline"), .wait("document.getElementById('pipeline-summary')?.textContent"),
            .eval("document.querySelector('.error')?.textContent"),
            .screenshot(screenshotPath("pipeline", in: work)),
        ])
        #expect(values[0] == "beaconflow console|0")
        #expect(values[1] == "four zones")
        #expect(values[2] == "depot/dock=0 depot/yard=1 hq/lobby=1 hq/lab=1", "sites by id, zones in the sites file's order")
        #expect(values[3] == "depot · 1 present|hq · 2 present")
        #expect(values[4] == "hq|2|ibeacon:cart:1:7@4.5,3.25", "hq on its floor plan with its present beacon's position, depot (no rects) as tiles")
        #expect(values[5] == "8 beacons, 3 present")
        // Present first, then labelled, by label in natural order (Tag 9 before Tag 10): the registry's beacons never
        // heard are listed, away.
        #expect(
            values[6] == [
                "<img src=x onerror=alert(1)>,ibeacon:cart:1:8,hq,lab,present", "Cart 7,ibeacon:cart:1:7,hq,lobby,present",
                ",mac:AA:BB:CC:DD:EE:01,depot,yard,present", "Spare,ibeacon:spare:1:1,,,away", "Tag 9,ibeacon:tag:1:9,,,away",
                "Tag 10,ibeacon:tag:1:10,,,away", ",mac:AA:BB:CC:DD:EE:02,depot,dock,away", ",mac:AA:BB:CC:DD:EE:03,depot,,away",
            ].joined(separator: "|"))
        // The low battery and the cell to replace within 9 days, the days left and the coldest night it carries on
        // hover; the other cell's charge lasts months, but it hangs outdoors and the night after next is forecast
        // colder than it carries.
        let nineDays = Date().addingTimeInterval(9 * 86_400).formatted(.iso8601.year().month().day())
        let twoDays = Date().addingTimeInterval(2 * 86_400).formatted(.iso8601.year().month().day())
        #expect(
            values[7] == "0|2300 mV:,\(nineDays):12 days left (9-15); carries nights down to 5 °C,"
                + "\(twoDays):250 days left (200-300); carries nights down to -31 °C; the forecast night of \(twoDays) (-34 °C) would stop it",
            "a label is text, never markup")
        // Searching (any case), a status filter, and a human age with its time on hover.
        #expect(values[9] == "Tag 9,Tag 10")
        #expect(values[10] == "ibeacon:cart:1:8")
        #expect(values[11] == "20 min ago|true")
        #expect(values[13] == "depot/depot-a1:online:live|depot/depot-a2:offline:awaited|hq/hq-a1:online:live|hq/hq-a2:offline:let_go")
        #expect(values[12] == "4 agents, 2 online")
        #expect(values[15] == "Not served by any ingest instance: depot, hq")
    }

    /// A live pipeline: two simulated agents, the broker, the ingest and PostgreSQL. With its pages left open, the
    /// browser sees a beacon walk from the lobby to the lab, and an agent that stops go offline.
    @Test(.enabled(if: MosquittoServer.executable != nil, "mosquitto is not installed"))
    func openPagesFollowABeaconMovingAndAnAgentStopping() async throws {
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let work = try makeTemporaryDirectory(prefix: "console-live")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let mover = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:1"
        try """
            sites:
              - id: hq
                allowed_lateness_s: 5
                zones: [{id: lobby, rect: [0, 0, 10, 8]}, {id: lab, rect: [10, 0, 20, 8]}]
                agents: [{id: hq-a1, zone: lobby}, {id: hq-a2, zone: lab}]
            beacons:
              - {id: "\(mover)", label: Mover}
            """.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        // The mover walks into the lab after 20 s; another beacon stays in the lobby.
        try """
            seed: 11
            start_unix_s: \(Int(Date().timeIntervalSince1970))
            duration_s: 600
            sites:
              - id: hq
                path_loss_exponent: 2.5
                shadowing_db: 2
                zones: [{id: lobby, rect: [0, 0, 10, 8]}, {id: lab, rect: [10, 0, 20, 8]}]
                agents: [{id: hq-a1, zone: lobby, position: [5, 4]}, {id: hq-a2, zone: lab, position: [15, 4]}]
            beacons:
              - {name: mover, site: hq, type: ibeacon, uuid: e2c56db5-dffb-48d2-b060-d0f5a71096e0, major: 1, minor: 1,
                 interval_ms: 250, path: [{at_s: 0, zone: lobby}, {at_s: 20, zone: lab}]}
              - {name: stayer, site: hq, type: ibeacon, uuid: e2c56db5-dffb-48d2-b060-d0f5a71096e0, major: 1, minor: 2,
                 interval_ms: 250, path: [{at_s: 0, zone: lobby}]}
            """.write(toFile: work + "/scenario.yaml", atomically: true, encoding: .utf8)
        let pipeline = try LivePipeline.start(broker: broker, database: database, work: work, agents: ["hq-a1", "hq-a2"])
        defer { pipeline.kill() }
        let connection = try PostgresConnection(database.conninfo)
        try await eventuallyTrue("the ingest has made the schema") {
            (try? connection.query("SELECT to_regclass('beaconflow.zones') IS NOT NULL").first?[0]) == "t"
        }
        let (console, base) = try await startConsoleProcess(database, work: work, token: Self.token)
        defer { console.terminate(SIGTERM) }

        let moverRow = "document.querySelector('tr[data-beacon=\"\(mover)\"]')"
        let agentRow = "document.querySelector('tr[data-agent=\"hq/hq-a2\"]')"
        let plan: [Browser.Step] = [
            .open(base + "/login?token=\(Self.token)&next=/beacons"), .eval("window.stayedOpen = 'beacons'"),
            .wait("\(moverRow)?.dataset.zone === 'lobby' && \(moverRow).cells[4].textContent", timeout: 60),
            .wait("\(moverRow)?.dataset.zone === 'lab' && \(moverRow).cells[4].textContent", timeout: 120),
            .eval("window.stayedOpen"),
            .open(base + "/agents"), .eval("window.stayedOpen = 'agents'"),
            .wait("\(agentRow)?.cells[2].textContent === 'online' && 'online'"),
            .wait("\(agentRow)?.cells[2].textContent === 'offline' && 'offline'", timeout: 60),
            .eval("window.stayedOpen + '|' + document.getElementById('agent-summary').textContent"),
            // The other pages of the live site: its floor with the beacons still there, and the pipeline.
            .open(base + "/"),
            .wait("document.querySelectorAll('svg.floor[data-site=\"hq\"] [data-zone]').length === 2 && /^hq · [12] present$/.test(document.querySelector('h2[data-site=\"hq\"]').textContent) && 'floor'"),
            .open(base + "/pipeline"),
            .wait("(document.getElementById('pipeline-summary')?.textContent || '').includes('1 of 2 agents online · 1 of 1 sites served') && 'served'"),
            // The ingest's own figures: its lag, commits, its broker and database.
            .wait("(() => { const r = document.querySelector('tr[data-ingest]'); return r && /^\\d+\\.\\d\\d s$/.test(r.cells[1].textContent) && Number(r.cells[4].textContent) > 0 && r.cells[6].textContent === '1 of 1' && r.cells[7].textContent === 'connected' && 'ingest' })()"),
        ]
        // The browser runs the plan while the test stops hq-a2 once the agents page shows it online.
        let output = work + "/browser.out"
        let planPath = work + "/plan.json"
        try JSONSerialization.data(withJSONObject: plan.map(\.json)).write(to: URL(fileURLWithPath: planPath))
        let browser = try ChildProcess(
            try #require(Browser.python), [Browser.driver, try #require(Browser.chromium), planPath],
            standardOutputPath: output, standardErrorPath: work + "/browser.err")
        defer { browser.terminate(SIGKILL) }
        let lines = { (try? String(contentsOfFile: output, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? [] }
        try await eventuallyTrue("the agents page shows hq-a2 online", timeout: .seconds(240)) {
            lines().contains { $0.contains("'online'") } || lines().contains { $0.contains("\"error\"") }
        }
        pipeline.agents[1].terminate(SIGTERM)
        _ = await browser.exit()
        let results = lines()
        let locations = (try? connection.query("SELECT beacon_id, zone_id, present, since, last_heard FROM beaconflow.beacon_locations"))?.map(\.values)
        #expect(browser.exitCode == 0, "\(results)\nbeacon_locations: \(locations ?? [])")
        let values = results.compactMap { line -> String? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return object["value"].map { $0 as? String ?? "\($0)" }
        }
        #expect(
            values == [
                "beacons", "present", "present", "beacons", "agents", "online", "offline", "agents|2 agents, 1 online", "floor", "served",
                "ingest",
            ],
            "the same pages followed the moves: \(results)")
    }
}
