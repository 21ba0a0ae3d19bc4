extension Duration {
    /// The whole nanoseconds of this duration (saturating).
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return product.addingReportingOverflow(attoseconds / 1_000_000_000).overflow ? .max : product + attoseconds / 1_000_000_000
    }

    /// The duration in seconds, as a floating-point number.
    package var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }

    /// Milliseconds as a fraction, for reports.
    package var milliseconds: Double { Double(nanoseconds) / 1_000_000 }
}
