import LocusCore

/// A site file's text parsed as `site.toml`, for the config tests.
func site(_ text: String) throws(ConfigError) -> SiteConfig {
    try SiteConfig.parse(Array(text.utf8), file: "site.toml")
}

/// Every diagnostic parsing `text` as a site file gives, as printed; empty when it parses.
func siteErrors(_ text: String) -> [String] {
    do {
        _ = try site(text)
        return []
    } catch {
        return error.diagnostics.map { $0.description }
    }
}
