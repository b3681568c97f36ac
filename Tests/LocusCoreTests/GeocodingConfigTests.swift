import Testing
@testable import LocusCore

/// `[geocoding]` and circles centred on a place: read with file:line:col errors, and the places
/// found in an index (`SiteConfig.resolvePlaces`) with the nearest spellings or the candidates.
@Suite struct GeocodingConfigTests {
    @Test func geocodingKeysAndTheirDefaults() throws {
        #expect(try site("board = \"b\"\n").geocoding == nil)
        let defaults = try #require(try site("board = \"b\"\n[geocoding]\n").geocoding)
        #expect(defaults.index == "/usr/share/locus/places.idx" && !defaults.annotate)
        #expect(defaults.maximumDistanceM == 25_000 && defaults.scope == .any)
        #expect(defaults.location == SourceLocation(line: 2, column: 1))
        let set = try #require(try site("""
            board = "b"
            [geocoding]
            index = "places.idx"
            annotate = true
            max_distance = "500 m"
            scope = "populated"
            """).geocoding)
        #expect(set.index == "places.idx" && set.annotate && set.maximumDistanceM == 500 && set.scope == .populated)
        #expect(set.location == SourceLocation(line: 3, column: 9), "errors about the index point at its path")
        #expect(try site("board = \"b\"\n[geocoding]\nmax_distance = \"1.5km\"\n").geocoding?.maximumDistanceM == 1_500)
        #expect(try site("board = \"b\"\n[geocoding]\nmax_distance = 2000\n").geocoding?.maximumDistanceM == 2_000, "a number is metres")
    }

    @Test func geocodingErrorsAreLocated() {
        let errors = siteErrors("""
            board = "b"
            [geocoding]
            index = ""
            annotate = "yes"
            max_distance = "25 mi"
            scope = "popluated"
            anotate = true
            """)
        #expect(errors == [
            "site.toml:3:9: 'geocoding.index' must name a file",
            "site.toml:4:12: 'geocoding.annotate' must be true or false, not string",
            "site.toml:5:16: 'geocoding.max_distance' = \"25 mi\": unknown unit 'mi'; use m or km (distances are metric)",
            "site.toml:6:9: 'geocoding.scope' = \"popluated\" is not one of: any | populated | site (did you mean \"populated\"?)",
            "site.toml:7:1: unknown key 'geocoding.anotate' (did you mean 'annotate'?)",
        ])
        #expect(siteErrors("board = \"b\"\n[geocoding]\nmax_distance = \"30000 km\"\n")
            == ["site.toml:3:16: 'geocoding.max_distance' is out of range (0 m...20004 km)"])
        #expect(siteErrors("board = \"b\"\n[geocoding]\nmax_distance = \"far\"\n")
            == ["site.toml:3:16: 'geocoding.max_distance' = \"far\": expected a number followed by m or km, such as \"500 m\" or \"25 km\""])
    }

    @Test func aCircleCentredOnAPlaceWaitsForTheIndex() throws {
        let config = try site("""
            board = "b"
            [[monitor.yard.condition]]
            id = "dock"
            circle = { place = "Dock 3", radius = 50 }
            """)
        #expect(config.needsPlaceIndex && config.geocoding == nil)
        let condition = try #require(config.monitors.first?.conditions.first)
        #expect(condition.place == PlaceReference(name: "Dock 3", location: SourceLocation(line: 4, column: 20)))
        guard case .circle(let latitude, let longitude, let radius) = condition.kind else { Issue.record("not a circle"); return }
        #expect(latitude.isNaN && longitude.isNaN && radius == 50)
        #expect(config.placeIndexLocation == SourceLocation(line: 4, column: 20))
        #expect(try !site("board = \"b\"\n").needsPlaceIndex)
    }

    @Test func aCircleIsCentredOnCoordinatesOrOnAPlaceNotBoth() {
        #expect(siteErrors("""
            board = "b"
            [[monitor.yard.condition]]
            id = "dock"
            circle = { place = "Dock 3", lat = 45.0, radius = 50 }
            """) == ["site.toml:4:36: 'monitor.yard.condition[1].circle.lat': a circle is centred on 'lat' and 'lon' or on a 'place', not both"])
        #expect(siteErrors("""
            board = "b"
            [[monitor.yard.condition]]
            id = "dock"
            circle = { place = "  ", radius = 50 }
            """) == ["site.toml:4:20: 'monitor.yard.condition[1].circle.place' must name a place (1...256 bytes)"])
        #expect(siteErrors("""
            board = "b"
            [[monitor.yard.condition]]
            id = "dock"
            circle = { place = "Dock 3" }
            """) == ["site.toml:4:10: missing required key 'monitor.yard.condition[1].circle.radius'"])
    }

    static let placesSite = """
        board = "b"
        [[monitor.yard.condition]]
        id = "dock"
        circle = { place = "container dock", radius = 50 }

        [[monitor.yard.condition]]
        id = "paris"
        circle = { place = "Paris", radius = 5000 }

        [[monitor.yard.condition]]
        id = "typo"
        circle = { place = "Bremerhafen", radius = 5000 }

        [[monitor.yard.condition]]
        id = "texas"
        circle = { place = "Paris, Texas", radius = 5000 }
        """

    @Test func placesAreFoundInTheIndexWithSpellingsAndCandidatesForTheRest() throws {
        var config = try site(Self.placesSite)
        try PlaceIndexTests.withIndex(PlaceIndexTests.build(PlaceIndexTests.sample)) { index in
            let problems = config.resolvePlaces(in: index, indexPath: "places.idx", file: "site.toml").map { $0.description }
            #expect(problems == [
                "site.toml:8:20: 'monitor.yard.condition[2].circle.place' = \"Paris\" names 3 places: Paris, Île-de-France, FR (population 2138551); Paris, Texas, US (population 24782); Paris, US (population 9846); qualify it with a country code or an administrative area: \"Paris, FR\" or \"Paris, Texas\"",
                "site.toml:12:20: 'monitor.yard.condition[3].circle.place' = \"Bremerhafen\" is no place in places.idx (did you mean \"Bremerhaven, Bremen, DE\"?)",
            ])
            let conditions = config.monitors[0].conditions
            guard case .circle(let latitude, let longitude, 50) = conditions[0].kind else { Issue.record("dock"); return }
            #expect(latitude == 53.54 && longitude == 8.58)
            #expect(conditions[0].place?.resolved == "Dock 3")
            guard case .circle(let texasLatitude, _, _) = conditions[3].kind else { Issue.record("texas"); return }
            #expect(texasLatitude == 33.66094 && conditions[3].place?.resolved == "Paris, Texas, US")
            // What was not found keeps no centre.
            guard case .circle(let unresolved, _, _) = conditions[1].kind else { Issue.record("paris"); return }
            #expect(unresolved.isNaN && conditions[1].place?.resolved == nil)
        }
    }

    @Test func similarNamesAreTheNearestSpellingsBestRankedFirst() throws {
        try PlaceIndexTests.withIndex(PlaceIndexTests.build(PlaceIndexTests.sample)) { index in
            #expect(index.similarNames(to: "Bremerhafen", limit: 3) == ["Bremerhaven, Bremen, DE"])
            // One edit from both: the more populous first; the site's place by its alias.
            #expect(index.similarNames(to: "Bremn", limit: 3) == ["Bremen, DE"])
            #expect(index.similarNames(to: "Pariz", limit: 3) == ["Paris, Île-de-France, FR", "Paris, Texas, US", "Paris, US"])
            #expect(index.similarNames(to: "Pariz", limit: 1) == ["Paris, Île-de-France, FR"])
            #expect(index.similarNames(to: "contaner dock", limit: 3) == ["Dock 3"])
            #expect(index.similarNames(to: "Dock 4, US", limit: 3) == ["Dock 3"], "the part before the comma")
            #expect(index.similarNames(to: "Atlantis", limit: 3).isEmpty)
            #expect(index.similarNames(to: "", limit: 3).isEmpty)
        }
    }

    @Test func resolutionSaysWhatANameNames() throws {
        try PlaceIndexTests.withIndex(PlaceIndexTests.build(PlaceIndexTests.sample)) { index in
            let search = PlaceNameSearch()
            guard case .found(let place) = index.resolve("BRV", search: search) else { Issue.record("BRV"); return }
            #expect(index.displayName(place) == "Bremerhaven, Bremen, DE" && index.describe(place) == "Bremerhaven, Bremen, DE (population 118610)")
            #expect(index.resolve("", search: search) == .invalid(.empty))
            guard case .ambiguous(3, let candidates) = index.resolve("paris", search: search) else { Issue.record("paris"); return }
            #expect(index.qualifiedExamples("paris", candidates: candidates, search: search) == ["paris, FR", "paris, Texas"])
            #expect(index.resolve("Yard gate", search: search).problem("Yard gate", index: index, indexPath: "x", search: search) == nil)
        }
    }

    @Test func distancesAreMetresOrKilometres() {
        #expect(Quantity.distanceM("25 km") == .success(25_000))
        #expect(Quantity.distanceM("500m") == .success(500))
        #expect(Quantity.distanceM("0.5 km") == .success(500))
        #expect(Quantity.distanceM("12") == .failure(Quantity.Problem(message: "expected a number followed by m or km, such as \"500 m\" or \"25 km\"")))
        #expect(Quantity.formatDistance(25_000) == "25 km" && Quantity.formatDistance(500) == "500 m" && Quantity.formatDistance(1_500) == "1500 m")
    }
}

/// The geocoding operations of the control protocol, as decoded, and the grant each needs.
@Suite struct GeocodingRequestTests {
    static func decode(_ line: String) -> Result<ControlRequest, ControlError> { ControlProtocol.decode(Array(line.utf8)).request }

    static func message(_ line: String) -> String? {
        guard case .failure(let error) = decode(line) else { return nil }
        return error.message
    }

    @Test func reverseGeocodeTakesAPointAndOptionallyWithinAndScope() {
        guard case .success(.reverseGeocode(45.5, 7.25, nil, nil)) = Self.decode(#"{"op":"reverse_geocode","latitude":45.5,"longitude":7.25}"#) else {
            Issue.record("a plain reverse_geocode")
            return
        }
        guard case .success(.reverseGeocode(_, _, 500, .site)) = Self.decode(#"{"op":"reverse_geocode","latitude":1,"longitude":2,"within":500,"scope":"site"}"#) else {
            Issue.record("within and scope")
            return
        }
        #expect(Self.message(#"{"op":"reverse_geocode","latitude":91,"longitude":2}"#) == "'latitude' must be a number in -90.0...90.0")
        #expect(Self.message(#"{"op":"reverse_geocode","longitude":2}"#) == "'latitude' (-90...90) and 'longitude' (-180...180) are required")
        #expect(Self.message(#"{"op":"reverse_geocode","latitude":1,"longitude":2,"scope":"near"}"#) == "'scope' is any, populated or site")
        #expect(Self.message(#"{"op":"reverse_geocod","latitude":1,"longitude":2}"#) == "unknown op 'reverse_geocod' (did you mean 'reverse_geocode'?)")
    }

    @Test func geocodeTakesANameAndALimit() {
        guard case .success(.geocode("Springfield, US", ControlProtocol.defaultGeocodeLimit)) = Self.decode(#"{"op":"geocode","name":"Springfield, US"}"#) else {
            Issue.record("a plain geocode")
            return
        }
        guard case .success(.geocode("Paris", 3)) = Self.decode(#"{"op":"geocode","name":"Paris","limit":3}"#) else { Issue.record("limit"); return }
        #expect(Self.message(#"{"op":"geocode","name":""}"#)?.hasPrefix("'name' (a place name of 1...256 bytes") == true)
        #expect(Self.message(#"{"op":"geocode","name":"Paris","limit":0}"#) == "'limit' must be a number in 1.0...50.0")
    }

    @Test func anAddMayCentreItsCircleOnAPlace() {
        let line = #"{"op":"add","monitor":"yard","identifier":"dock","circle":{"place":"Dock 3","radius":50},"assuming":"satisfied","settings":{"dwell_ms":2000}}"#
        guard case .success(.addAtPlace(let monitor, let identifier, "Dock 3", 50, let settings, .satisfied)) = Self.decode(line) else {
            Issue.record("add with a place")
            return
        }
        #expect(monitor.description == "yard" && identifier.description == "dock" && settings.dwellMs == 2_000)
        #expect(Self.message(#"{"op":"add","monitor":"m","identifier":"i","circle":{"place":"Dock 3","lat":1,"radius":50}}"#)
            == "'circle' is centred on lat and lon or on a place, not both")
        #expect(Self.message(#"{"op":"add","monitor":"m","identifier":"i","circle":{"place":"Dock 3"}}"#)
            == "'circle' with a place needs place (a name) and radius (metres > 0)")
    }

    /// Like locate: the answers are ranked from the gateway's position. Adding is changing.
    @Test func theGeocodingOperationsNeedThePositionsGrant() throws {
        let reverse = try Self.decode(#"{"op":"reverse_geocode","latitude":1,"longitude":2}"#).get()
        let forward = try Self.decode(#"{"op":"geocode","name":"Paris"}"#).get()
        let add = try Self.decode(#"{"op":"add","monitor":"m","identifier":"i","circle":{"place":"Dock 3","radius":5}}"#).get()
        #expect(reverse.requiredGrant == .positions && forward.requiredGrant == .positions && add.requiredGrant == .change)
    }
}
