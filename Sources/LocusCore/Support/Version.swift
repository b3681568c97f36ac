/// The product version, printed by `locus --version` and stamped into log start records.
public enum LocusVersion {
    public static let string = "0.1.0"
}
