import AccuracyHarness
import ArgumentParser
import BeaconIngest
import BeaconPositions
import Foundation

struct CalibrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "calibrate",
        abstract: "Fit a site's radio model for positions from a calibration walk.",
        discussion: """
            Reads recordings of a beacon carried through the site with its true positions (docs/recordings.md: the readings, <name>.positions.csv, and sites.yaml beside them, whose agents have 'at'), fits the log-distance model of the radio to every reading at its true distance (least squares: the power at 1 m and the path-loss exponent for the site, the mean residual of each receiver as its offset, the residuals' spread as the noise) and prints the sites-file keys that give the site that model: position_power_at_1m_dbm, position_path_loss_exponent and position_noise_db for the site, rssi_offset_db for each agent (added to what it hears). Walk every zone, slowly, near and far from each receiver; keep the walk apart from the recordings you judge the positions on.

            With --radio-map, it also writes what each receiver heard above the fitted model where it heard it (a point each 0.5 m the walk came within about 2 m of: receiver,x_m,y_m,correction_db), for the site's position_radio_map key; the closer the walk covers the floor, the more of it the map corrects. It prints, for each zone, the share of it the walk came near enough to map (with or without --radio-map): where the walk did not come near, positions rest on the model alone and err about as much as a weighted centroid.

            Examples:
              beaconflow calibrate \\
                --recording examples/recordings/open-office/straight-01.csv
              beaconflow calibrate \\
                --recording examples/recordings/furnished-flat/calibration.csv \\
                --radio-map flat-radio-map.csv
            """
    )

    @Option(help: "A recording with its true positions (repeatable); all of one site.") var recording: [String] = []
    @Option(help: "A file to write the radio map to.") var radioMap: String?

    func run() throws {
        guard !recording.isEmpty else { throw ValidationError("give at least one --recording") }
        let fitted: (model: RadioModel, offsets: [(agent: String, offsetDb: Double)], map: RadioMap, readings: Int)
        let walksSite: SitesConfiguration.Site
        do {
            let walks = try recording.map { try RecordedWalk(recording: $0) }
            for walk in walks { walk.sayReceiversWithoutAgent(command: "calibrate") }
            walksSite = walks[0].site
            fitted = try RecordedWalk.calibration(walks)
        } catch {
            throw ValidationError("\(error)")
        }
        print("# site \(walksSite.id): the radio model of \(fitted.readings) readings at their true distances")
        print(String(format: "position_power_at_1m_dbm: %.1f", fitted.model.powerAt1mDbm))
        print(String(format: "position_path_loss_exponent: %.2f", fitted.model.exponent))
        print(String(format: "position_noise_db: %.1f", fitted.model.sigmaDb))
        print("# each agent's rssi_offset_db")
        for (agent, offset) in fitted.offsets {
            // What the receiver hears above the model is taken off its readings (to a tenth of a dB, never "-0.0").
            let correction = (-offset * 10).rounded() / 10
            print(String(format: "%@: %.1f", agent, correction == 0 ? 0 : correction))
        }
        // Where the walk did not come near, positions rest on the model alone, about as far off as a centroid.
        let zones = walksSite.zones.compactMap { zone in zone.rect.map { (zone.id, $0) } }
        if !zones.isEmpty {
            print("# how much of each zone the walk came near enough to map: walk again where little")
            for (zone, rect) in zones {
                print(String(format: "# %@: %.0f %%", zone, 100 * fitted.map.reach(over: rect)))
            }
        }
        if let radioMap {
            do {
                try fitted.map.csv.write(toFile: radioMap, atomically: true, encoding: .utf8)
            } catch {
                throw ValidationError("cannot write the radio map to \(radioMap): \(error.localizedDescription)")
            }
            print("# the radio map: position_radio_map: \(radioMap)")
        }
    }
}
