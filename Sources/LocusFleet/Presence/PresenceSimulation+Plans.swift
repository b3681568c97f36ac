extension PresenceSimulation {
    /// The floor plans the bench runs, as floor-plan files (so the bench reads them the way a
    /// site's file is read).
    public enum Plans {
        /// The set-up of ESPresense-companion's simulated accuracy baseline (its docs/accuracy.md,
        /// Apache License 2.0; the set-up as the ESPresense firmware's accuracy harness scenario
        /// baseline_4node_6x4m.json gives it, GNU AGPL 3.0): only its facts and figures are
        /// reused, none of their code. A 6 m
        /// x 4 m floor, the living room first so it wins at x = 4, four stations in the corners
        /// whose RSSI is synthesised from the planar distance (so no heights here), RSSI at 1 m
        /// of -59 dBm and a path-loss exponent of 3.
        public static let espresense = """
            path_loss_exponent = 3.0
            [[area]]
            name = "living"
            rectangle = [0, 0, 4, 4]
            [[area]]
            name = "bedroom"
            rectangle = [4, 0, 6, 4]
            [[gateway]]
            id = "north-west"
            x = 0.2
            y = 3.8
            [[gateway]]
            id = "south-west"
            x = 0.2
            y = 0.2
            [[gateway]]
            id = "north-east"
            x = 5.8
            y = 3.8
            [[gateway]]
            id = "south-east"
            x = 5.8
            y = 0.2
            """

        /// A 10 m x 8 m flat of five rooms with interior walls (doors left open as gaps) and
        /// five ceiling gateways; the bathroom has none of its own.
        public static let house = """
            path_loss_exponent = 2.8
            tag_height_m = 1.0
            [[area]]
            name = "living"
            rectangle = [0, 0, 5, 4]
            [[area]]
            name = "kitchen"
            rectangle = [5, 0, 10, 4]
            [[area]]
            name = "bedroom"
            rectangle = [0, 4, 4, 8]
            [[area]]
            name = "bathroom"
            rectangle = [4, 4, 6, 8]
            [[area]]
            name = "study"
            rectangle = [6, 4, 10, 8]
            [[wall]]
            from = [5, 0]
            to = [5, 1.5]
            attenuation_db = 4
            [[wall]]
            from = [5, 2.5]
            to = [5, 4]
            attenuation_db = 4
            [[wall]]
            from = [0, 4]
            to = [1.5, 4]
            attenuation_db = 4
            [[wall]]
            from = [2.5, 4]
            to = [10, 4]
            attenuation_db = 4
            [[wall]]
            from = [4, 4]
            to = [4, 8]
            attenuation_db = 6
            [[wall]]
            from = [6, 4]
            to = [6, 8]
            attenuation_db = 6
            [[gateway]]
            id = "living"
            x = 2.5
            y = 0.3
            z = 2.2
            [[gateway]]
            id = "kitchen"
            x = 9.7
            y = 2.0
            z = 2.2
            [[gateway]]
            id = "bedroom"
            x = 0.3
            y = 7.7
            z = 2.2
            [[gateway]]
            id = "study"
            x = 9.7
            y = 7.7
            z = 2.2
            [[gateway]]
            id = "hall"
            x = 5.0
            y = 3.8
            z = 2.2
            """

        /// A 40 m x 20 m warehouse: four loading docks along the south wall (declared first, so
        /// they win over the floor around them), an office with walls in the north-east corner,
        /// and the open floor; eight gateways at 4 m.
        public static let warehouse = """
            path_loss_exponent = 2.2
            tag_height_m = 1.0
            [[area]]
            name = "dock-1"
            rectangle = [2, 0, 8, 4]
            [[area]]
            name = "dock-2"
            rectangle = [10, 0, 16, 4]
            [[area]]
            name = "dock-3"
            rectangle = [18, 0, 24, 4]
            [[area]]
            name = "dock-4"
            rectangle = [26, 0, 32, 4]
            [[area]]
            name = "office"
            rectangle = [32, 12, 40, 20]
            [[area]]
            name = "floor"
            rectangle = [0, 0, 40, 20]
            [[wall]]
            from = [32, 12]
            to = [32, 20]
            attenuation_db = 8
            [[wall]]
            from = [32, 12]
            to = [38, 12]
            attenuation_db = 8
            [[gateway]]
            id = "dock-1"
            x = 5
            y = 1
            z = 4
            [[gateway]]
            id = "dock-2"
            x = 13
            y = 1
            z = 4
            [[gateway]]
            id = "dock-3"
            x = 21
            y = 1
            z = 4
            [[gateway]]
            id = "dock-4"
            x = 29
            y = 1
            z = 4
            [[gateway]]
            id = "floor-west"
            x = 6
            y = 14
            z = 4
            [[gateway]]
            id = "floor-middle"
            x = 20
            y = 12
            z = 4
            [[gateway]]
            id = "office"
            x = 37
            y = 17
            z = 3
            [[gateway]]
            id = "floor-east"
            x = 36
            y = 5
            z = 4
            """

        /// The named plans, ESPresense's first.
        public static let all: [(name: String, toml: String)] = [("espresense", espresense), ("house", house), ("warehouse", warehouse)]

        public static func plan(_ toml: String) -> PresenceFloorPlan {
            do {
                return try PresenceFloorPlan.parse(toml: toml)
            } catch {
                preconditionFailure("a built-in floor plan does not parse: \(error)")
            }
        }
    }
}
