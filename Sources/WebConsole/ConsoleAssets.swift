import Hummingbird

/// The console's page shell, script and style. The script builds every element with text nodes (never markup
/// from the data), so an id or label cannot inject anything into a page.
enum ConsoleAssets {
    static func response(_ status: HTTPResponse.Status, _ text: String, type: String) -> Response {
        Response(status: status, headers: [.contentType: type], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func page(path: String, title: String) -> String {
        let links = ConsoleServer.pages.sorted { $0.key.count < $1.key.count || ($0.key.count == $1.key.count && $0.key < $1.key) }
            .map { link in "<a href=\"\(link.key)\"\(link.key == path ? " aria-current=\"page\"" : "")>\(link.value)</a>" }
            .joined(separator: " ")
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>beaconflow · \(title)</title><link rel="stylesheet" href="/console.css"><script src="/console.js" defer></script></head>
            <body data-page="\(path)"><header><strong>beaconflow</strong> <nav>\(links)</nav> <span id="status">connecting…</span></header>
            <main id="content"><p>Loading…</p></main></body></html>
            """
    }

    static let loginPage = """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>beaconflow · sign in</title></head>
        <body><h1>beaconflow console</h1><p>Open the console's login link (<code>/login?token=…</code>), which
        <code>beaconflow console</code> prints at start, or send the token as <code>Authorization: Bearer</code>.</p></body></html>
        """

    static let style = """
        body { font: 14px system-ui, sans-serif; margin: 0; color: #1d2330; background: #f4f6f9; }
        header { background: #1d2330; color: #fff; padding: 10px 16px; display: flex; gap: 16px; align-items: center; }
        header a { color: #c9d4ff; margin-right: 10px; text-decoration: none; } header a[aria-current] { color: #fff; font-weight: bold; }
        #status { margin-left: auto; font-size: 12px; color: #c9d4ff; }
        main { padding: 16px; } h2 { margin: 18px 0 8px; }
        .tiles { display: flex; flex-wrap: wrap; gap: 10px; }
        .tile { background: #fff; border: 1px solid #d5dbe6; border-radius: 6px; padding: 10px 14px; min-width: 120px; }
        .tile .count { font-size: 22px; font-weight: bold; } svg.floor text.count { font-weight: bold; }
        .sites { display: flex; flex-wrap: wrap; gap: 0 24px; } .site { flex: 0 1 560px; }
        .tile.busy { border-color: #2f6fed; background: #eef3ff; }
        svg.floor { background: #fff; border: 1px solid #d5dbe6; width: 100%; max-height: 380px; }
        svg.floor rect { fill: #eef1f6; stroke: #8a94a8; stroke-width: 0.08; } svg.floor rect.busy { fill: #cfdcff; }
        svg.floor rect.full { fill: #ffe3a8; } svg.floor rect.over { fill: #f7b4ae; } svg.floor text.name { fill: #3d4659; }
        .tile.full { border-color: #c98a00; background: #fff4dc; } .tile.over { border-color: #b3261e; background: #fde7e7; }
        .tile .name { font-size: 12px; color: #3d4659; }
        .filters { display: flex; gap: 8px; margin: 4px 0 8px; } .filters input { min-width: 220px; }
        svg.floor circle.dot { fill: #1f4fbf; } svg.floor circle.spread { fill: #1f4fbf; fill-opacity: 0.12; }
        table { border-collapse: collapse; background: #fff; } th, td { border: 1px solid #d5dbe6; padding: 4px 8px; text-align: left; }
        th { background: #e8ecf3; } tr.offline td, tr.away td { color: #8a94a8; } .bad { color: #b3261e; font-weight: bold; }
        .summary { margin: 8px 0 12px; } .error { background: #fde7e7; border: 1px solid #b3261e; padding: 8px; }
        """

    static let script = #"""
        "use strict";
        const page = document.body.dataset.page;
        const content = document.getElementById("content");
        const status = document.getElementById("status");

        function el(tag, attributes, ...children) {
          const node = document.createElement(tag);
          for (const [key, value] of Object.entries(attributes || {})) {
            if (value !== null && value !== undefined) node.setAttribute(key, value);
          }
          for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(child === null || child === undefined ? "" : String(child)));
          return node;
        }
        function svg(tag, attributes, text) {
          const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
          for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
          if (text !== undefined) node.textContent = text;
          return node;
        }
        // One style for every time: how long ago, as a person says it, with the time itself (UTC) on hover.
        function ago(time, now) {
          if (!time) return "never";
          const seconds = Math.max(0, Math.round((Date.parse(now) - Date.parse(time)) / 1000));
          if (seconds < 10) return "just now";
          if (seconds < 60) return seconds + " s ago";
          if (seconds < 3600) return Math.floor(seconds / 60) + " min ago";
          if (seconds < 86400) {
            const minutes = Math.floor(seconds % 3600 / 60);
            return Math.floor(seconds / 3600) + " h" + (minutes ? " " + minutes + " min" : "") + " ago";
          }
          return Math.floor(seconds / 86400) + " d ago";
        }
        function at(time) { return time ? new Date(time).toISOString().slice(0, 19).replace("T", " ") + " UTC" : null; }
        function when(time, now) { return el("td", { title: at(time) }, ago(time, now)); }
        const natural = new Intl.Collator("en", { numeric: true, sensitivity: "base" });
        // The present beacons of a zone, by name, for the floor and the tiles: at most `shown`, then how many more.
        function names(doc, site, zone, shown) {
          const here = doc.beacons.filter((b) => b.present && b.site_id === site && b.zone_id === zone)
            .map((b) => b.label || b.beacon_id).sort(natural.compare);
          return here.length > shown ? [...here.slice(0, shown), "+" + (here.length - shown) + " more"] : here;
        }
        // How full a zone is against its capacity: busy, full from 80 %, over past it; busy when it has none.
        function fullness(zone) {
          if (zone.occupants === 0) return "";
          if (!zone.capacity) return "busy";
          const ratio = zone.occupants / zone.capacity;
          return ratio > 1 ? "over" : ratio >= 0.8 ? "full" : "busy";
        }
        function table(headings, rows) {
          return el("table", {}, el("thead", {}, el("tr", {}, ...headings.map((h) => el("th", {}, h)))), el("tbody", {}, ...rows));
        }

        function sites(doc) {
          const bySite = new Map();
          for (const zone of doc.zones) {
            if (!bySite.has(zone.site_id)) bySite.set(zone.site_id, []);
            bySite.get(zone.site_id).push(zone);
          }
          const parts = [];
          for (const [site, zones] of bySite) {
            const total = zones.reduce((sum, zone) => sum + zone.occupants, 0);
            const part = el("section", { class: "site" }, el("h2", { "data-site": site }, site + " · " + total + " present"));
            parts.push(part);
            if (zones.every((zone) => zone.rect)) {
              const x0 = Math.min(...zones.map((z) => z.rect[0])), y0 = Math.min(...zones.map((z) => z.rect[1]));
              const x1 = Math.max(...zones.map((z) => z.rect[2])), y1 = Math.max(...zones.map((z) => z.rect[3]));
              const floor = svg("svg", { class: "floor", "data-site": site, viewBox: `${x0 - 0.5} ${y0 - 0.5} ${x1 - x0 + 1} ${y1 - y0 + 1}` });
              const scale = (x1 - x0) / 40;
              for (const zone of zones) {
                const [a, b, c, d] = zone.rect;
                const group = svg("g", { "data-zone": site + "/" + zone.zone_id, "data-occupants": zone.occupants });
                group.append(svg("rect", { x: a, y: b, width: c - a, height: d - b, class: fullness(zone) }));
                group.append(svg("text", { x: a + 0.3 * scale, y: b + 1.2 * scale, "font-size": scale }, zone.zone_id));
                group.append(svg("text", { x: a + 0.3 * scale, y: b + 2.8 * scale, "font-size": 1.6 * scale, class: "count" },
                  zone.occupants + (zone.capacity ? " / " + zone.capacity : "")));
                names(doc, site, zone.zone_id, 3).forEach((name, index) =>
                  group.append(svg("text", { x: a + 0.3 * scale, y: b + (4 + 1.1 * index) * scale, "font-size": 0.9 * scale, class: "name" }, name)));
                floor.append(group);
              }
              // Each present beacon with a position: a dot, and a disc as wide as its error.
              for (const position of (doc.positions || []).filter((p) => p.site_id === site)) {
                const dot = svg("g", { "data-beacon": position.beacon_id });
                dot.append(svg("title", {}, (position.label || position.beacon_id) + " · ±" + position.error_m + " m"));
                dot.append(svg("circle", { cx: position.x, cy: position.y, r: position.error_m, class: "spread" }));
                dot.append(svg("circle", { cx: position.x, cy: position.y, r: 0.4 * scale, class: "dot" }));
                floor.append(dot);
              }
              part.append(floor);
            } else {
              part.append(el("div", { class: "tiles" }, ...zones.map((zone) =>
                el("div", { class: "tile " + fullness(zone), "data-zone": site + "/" + zone.zone_id, "data-occupants": zone.occupants },
                  el("div", {}, zone.zone_id), el("div", { class: "count" }, zone.occupants + (zone.capacity ? " / " + zone.capacity : "")),
                  ...names(doc, site, zone.zone_id, 5).map((name) => el("div", { class: "name" }, name))))));
            }
          }
          if (parts.length === 0) return [el("p", {}, "No sites yet: the ingest writes them when it starts.")];
          return [el("div", { class: "sites" }, ...parts)];
        }

        // The beacons page's search and filters, made once and kept across updates (so that typing is not lost).
        const filter = { text: "", site: "", zone: "", status: "" };
        let controls = null;
        function choices(select, values) {
          const kept = select.value;
          select.replaceChildren(el("option", { value: "" }, select.dataset.all), ...values.map((v) => el("option", { value: v }, v)));
          select.value = values.includes(kept) ? kept : "";
        }
        function beaconControls(doc) {
          if (!controls) {
            const search = el("input", { id: "beacon-search", type: "search", placeholder: "Search label or id", "aria-label": "Search" });
            const selects = ["site", "zone", "status"].map((key) => el("select", { id: "beacon-" + key, "data-all": "any " + key, "aria-label": key }));
            controls = el("div", { class: "filters" }, search, ...selects);
            search.addEventListener("input", () => { filter.text = search.value.trim().toLowerCase(); render(last); });
            selects.forEach((select, index) => select.addEventListener("change", () => {
              filter[["site", "zone", "status"][index]] = select.value; render(last);
            }));
          }
          const unique = (values) => [...new Set(values.filter((v) => v))].sort(natural.compare);
          const [site, zone, status] = [...controls.querySelectorAll("select")];
          choices(site, unique(doc.beacons.map((b) => b.site_id)));
          choices(zone, unique(doc.beacons.map((b) => b.zone_id)));
          choices(status, unique(["present", "away", ...doc.beacons.map((b) => b.status)]));
          return controls;
        }
        function matches(b) {
          if (filter.text && !((b.label || "").toLowerCase().includes(filter.text) || b.beacon_id.toLowerCase().includes(filter.text))) return false;
          if (filter.site && b.site_id !== filter.site) return false;
          if (filter.zone && b.zone_id !== filter.zone) return false;
          if (filter.status === "present" || filter.status === "away") return b.present === (filter.status === "present");
          return !filter.status || b.status === filter.status;
        }
        // The day to have replaced its cell by (UTC), red within 30 days; the days left, their interval, the
        // coldest night the cell carries and the forecast night that would stop it on hover.
        function replaceBy(b, now) {
          if (!b.replace_by) return el("td", {}, "");
          const soon = Date.parse(b.replace_by) - Date.parse(now) < 30 * 86400000;
          const interval = b.days_left_low !== null && b.days_left_low !== undefined ? ` (${Math.round(b.days_left_low)}-${Math.round(b.days_left_high)})` : "";
          const left = b.est_days_left !== null && b.est_days_left !== undefined ? `${Math.round(b.est_days_left)} days left${interval}` : null;
          const cold = b.coldest_carried_c !== null && b.coldest_carried_c !== undefined ? `carries nights down to ${Math.round(b.coldest_carried_c)} °C` : null;
          const night = b.cold_night ? `the forecast night of ${b.cold_night} (${Math.round(b.cold_night_low_c)} °C) would stop it` : null;
          const title = [left, cold, night].filter((part) => part).join("; ") || null;
          return el("td", { class: soon ? "bad" : null, title: title }, b.replace_by.slice(0, 10));
        }
        function beacons(doc) {
          const present = doc.beacons.filter((b) => b.present).length;
          // Present first, then those with a label; by label or id in natural order (tag-2 before tag-10).
          const listed = doc.beacons.filter(matches).sort((a, b) =>
            (b.present - a.present) || ((b.label ? 1 : 0) - (a.label ? 1 : 0)) || natural.compare(a.label || a.beacon_id, b.label || b.beacon_id));
          const rows = listed.map((b) => el("tr", { class: b.present ? "present" : "away", "data-beacon": b.beacon_id, "data-zone": b.zone_id },
            el("td", {}, b.label || ""), el("td", {}, b.beacon_id), el("td", {}, b.site_id), el("td", {}, b.zone_id || ""),
            el("td", {}, b.present ? "present" : "away"), when(b.since, doc.generated_at), when(b.last_heard, doc.generated_at),
            el("td", { class: b.status === "low_battery" ? "bad" : null }, b.battery_mv ? b.battery_mv + " mV" : b.battery_pct !== null && b.battery_pct !== undefined ? Math.round(b.battery_pct) + " %" : ""),
            replaceBy(b, doc.generated_at),
            el("td", {}, b.temperature_c !== null && b.temperature_c !== undefined ? b.temperature_c.toFixed(1) + " °C" : ""),
            el("td", {}, b.status || "")));
          const filtered = listed.length < doc.beacons.length ? ` · ${listed.length} shown` : "";
          return [
            beaconControls(doc),
            el("p", { class: "summary", id: "beacon-summary" }, `${doc.beacon_count} beacons, ${present} present` +
              (doc.beacon_count > doc.beacons.length ? ` (the first ${doc.beacons.length} listed)` : "") + filtered),
            table(["Label", "Beacon", "Site", "Zone", "Presence", "Since", "Last heard", "Battery", "Replace by", "Temperature", "Status"], rows),
          ];
        }

        function agents(doc) {
          const online = doc.agents.filter((a) => a.online).length;
          const rows = doc.agents.map((a) => el("tr", { class: a.online ? "online" : "offline", "data-agent": a.site_id + "/" + a.agent_id },
            el("td", {}, a.site_id), el("td", {}, a.agent_id), el("td", { class: a.online ? null : "bad" }, a.online ? "online" : "offline"),
            when(a.last_batch_at, doc.generated_at),
            el("td", {}, a.clock_offset_ms !== null && a.clock_offset_ms !== undefined ? Math.round(a.clock_offset_ms) + " ms" : ""),
            el("td", {}, a.zone_state || ""), el("td", {}, a.last_error || "")));
          return [
            el("p", { class: "summary", id: "agent-summary" }, `${doc.agents.length} agents, ${online} online`),
            table(["Site", "Agent", "State", "Last batch", "Clock offset", "Zone decisions", "Last error"], rows),
          ];
        }

        function pipeline(doc) {
          const served = new Set(doc.owners.map((o) => o.site_id));
          const sitesKnown = new Set(doc.zones.map((z) => z.site_id));
          const unserved = [...sitesKnown].filter((s) => !served.has(s));
          const rows = doc.owners.map((o) => el("tr", { "data-owner": o.site_id },
            el("td", {}, o.site_id), el("td", {}, o.instance), when(o.since, doc.generated_at), el("td", {}, at(o.lease_expires))));
          const number = (value, digits) => value === null || value === undefined ? "" : Number(value).toFixed(digits);
          const ingests = (doc.ingests || []).map((i) => el("tr", { "data-ingest": i.instance },
            el("td", {}, i.instance), el("td", { class: i.lag_s > 5 ? "bad" : null }, i.lag_s === null ? "" : number(i.lag_s, 2) + " s"),
            el("td", {}, number(i.batches_per_s, 1)), el("td", {}, number(i.sightings_per_s, 0)), el("td", {}, i.batches_committed ?? ""),
            el("td", { class: i.batches_rejected > 0 ? "bad" : null }, i.batches_rejected ?? ""),
            el("td", { class: i.brokers_connected < i.brokers ? "bad" : null }, i.brokers === null ? "" : i.brokers_connected + " of " + i.brokers),
            el("td", { class: i.database_connected === false ? "bad" : null }, i.database_connected === null ? "" : i.database_connected ? "connected" : "lost"),
            when(i.status_at, doc.generated_at)));
          return [
            el("p", { class: "summary", id: "pipeline-summary" },
              `${doc.sightings_last_minute} sightings in the last minute · ${doc.agents.filter((a) => a.online).length} of ${doc.agents.length} agents online · ` +
              `${served.size} of ${sitesKnown.size} sites served`),
            unserved.length ? el("p", { class: "error" }, "Not served by any ingest instance: " + unserved.join(", ")) : "",
            el("h2", {}, "Ingest instances"),
            ingests.length ? table(["Instance", "Lag", "Batches/s", "Sightings/s", "Batches committed", "Batches refused", "Brokers", "Database", "Updated"], ingests)
              : el("p", {}, "No ingest instance is running."),
            el("h2", {}, "Sites"),
            table(["Site", "Ingest instance", "Serving since", "Lease ends"], rows),
          ];
        }

        const views = { "/": sites, "/beacons": beacons, "/agents": agents, "/pipeline": pipeline };
        let last = null;
        function render(doc) {
          if (!doc) return;
          last = doc;
          if (doc.error) {
            content.replaceChildren(el("p", { class: "error" }, "The console cannot read the database: " + doc.error));
            status.textContent = "database unavailable";
            return;
          }
          const nodes = views[page](doc);
          // A node the page keeps (the beacons' search) stays where it is, so that it keeps its focus.
          if (nodes[0] === controls && content.firstChild === controls) {
            while (controls.nextSibling) controls.nextSibling.remove();
            controls.after(...nodes.slice(1));
          } else {
            content.replaceChildren(...nodes);
          }
          status.textContent = "live · " + at(doc.generated_at);
          document.body.dataset.generatedAt = doc.generated_at;
        }
        async function poll() {
          try { render(await (await fetch("/api/snapshot", { credentials: "same-origin" })).json()); } catch (error) { status.textContent = "offline"; }
        }
        poll();
        if (window.EventSource) {
          const events = new EventSource("/events");
          events.onmessage = (event) => render(JSON.parse(event.data));
          events.onerror = () => { if (events.readyState === EventSource.CLOSED) setInterval(poll, 5000); };
        } else {
          setInterval(poll, 5000);
        }
        """#
}
