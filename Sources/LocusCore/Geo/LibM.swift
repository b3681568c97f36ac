// The C math library, declared by symbol. LocusCore imports only the standard library, and
// neither build's standard library has sin/cos/atan2 for Double (Embedded Swift has no Glibc
// module at all). libm is linked into every product that uses these: CLocus links it on the
// host (and libswiftCore depends on it), the device toolset passes -lm. Double arguments and
// results are passed in the same registers by the Swift and C calling conventions on x86_64 and
// aarch64, which is what makes a bodiless `@_silgen_name` declaration call the C function.
//
// Results are glibc's (correctly rounded or within 1 ulp); the geodesy built on them is
// accurate to nanometres, far below any decision threshold, but a different libm could change
// the last bits of a distance. That is why decisions that must be reproduced exactly on replay
// compare against thresholds with margins, never at the last bit.

@_noAllocation @_silgen_name("sin") private func c_sin(_ x: Double) -> Double
@_noAllocation @_silgen_name("cos") private func c_cos(_ x: Double) -> Double
@_noAllocation @_silgen_name("tan") private func c_tan(_ x: Double) -> Double
@_noAllocation @_silgen_name("asin") private func c_asin(_ x: Double) -> Double
@_noAllocation @_silgen_name("acos") private func c_acos(_ x: Double) -> Double
@_noAllocation @_silgen_name("atan") private func c_atan(_ x: Double) -> Double
@_noAllocation @_silgen_name("atan2") private func c_atan2(_ y: Double, _ x: Double) -> Double
@_noAllocation @_silgen_name("hypot") private func c_hypot(_ x: Double, _ y: Double) -> Double
@_noAllocation @_silgen_name("cbrt") private func c_cbrt(_ x: Double) -> Double
@_noAllocation @_silgen_name("pow") private func c_pow(_ x: Double, _ y: Double) -> Double
@_noAllocation @_silgen_name("exp") private func c_exp(_ x: Double) -> Double
@_noAllocation @_silgen_name("log") private func c_log(_ x: Double) -> Double
@_noAllocation @_silgen_name("log10") private func c_log10(_ x: Double) -> Double

/// The one place LocusCore reaches libm.
///
/// The declarations carry `@_noAllocation` (libm's functions do not allocate) because the
/// optimizer's allocation check cannot see into a function without a Swift body and rejects
/// calls to one otherwise. For the same reason `sqrt` and `remainder` wrap the standard library's
/// `squareRoot()` and `remainder(dividingBy:)` (C shims underneath, one instruction for sqrt)
/// with the `no_performance_analysis` semantics: call these, not the methods, in `@_noAllocation`
/// code. `rounded(_:)` is rejected there too (its rule enum's metadata); use `floor`.
public enum LibM {
    @_semantics("no_performance_analysis") @inline(__always)
    public static func sqrt(_ x: Double) -> Double { x.squareRoot() }
    /// IEEE remainder: x - n·y with n the integer nearest x / y; exact.
    @_semantics("no_performance_analysis") @inline(__always)
    public static func remainder(_ x: Double, _ y: Double) -> Double { x.remainder(dividingBy: y) }
    /// The largest integer <= x (x itself if it is not finite or already integral).
    @_semantics("no_performance_analysis") @inline(__always)
    public static func floor(_ x: Double) -> Double { x.rounded(.down) }
    /// The integer nearest x, halfway cases away from zero (`rounded()`, C's round).
    @_semantics("no_performance_analysis") @inline(__always)
    public static func round(_ x: Double) -> Double { x.rounded() }

    @inline(__always) public static func sin(_ x: Double) -> Double { c_sin(x) }
    @inline(__always) public static func cos(_ x: Double) -> Double { c_cos(x) }
    @inline(__always) public static func tan(_ x: Double) -> Double { c_tan(x) }
    @inline(__always) public static func asin(_ x: Double) -> Double { c_asin(x) }
    @inline(__always) public static func acos(_ x: Double) -> Double { c_acos(x) }
    @inline(__always) public static func atan(_ x: Double) -> Double { c_atan(x) }
    @inline(__always) public static func atan2(_ y: Double, _ x: Double) -> Double { c_atan2(y, x) }
    /// sqrt(x² + y²) without intermediate overflow or underflow.
    @inline(__always) public static func hypot(_ x: Double, _ y: Double) -> Double { c_hypot(x, y) }
    @inline(__always) public static func cbrt(_ x: Double) -> Double { c_cbrt(x) }
    @inline(__always) public static func pow(_ x: Double, _ y: Double) -> Double { c_pow(x, y) }
    @inline(__always) public static func exp(_ x: Double) -> Double { c_exp(x) }
    @inline(__always) public static func log(_ x: Double) -> Double { c_log(x) }
    @inline(__always) public static func log10(_ x: Double) -> Double { c_log10(x) }
}
