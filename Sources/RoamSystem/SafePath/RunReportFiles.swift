import Glibc

/// How the files of a run's report are made: its timeline, summary, HTML page, workload output,
/// decision logs and captures.
package enum RunReportFiles {
    /// Read and write for the run's user, read for its group, nothing for anyone else: a root
    /// run's captures and its programs' output are not for every local user to read.
    public static let mode: mode_t = 0o640
}
