import ArgumentParser
import RoamReport
import Simulator

/// `roam report DIR` and `roam report A B`: the HTML report of a run, or two runs compared.
struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Render a run's report.html again, or compare two runs in one page.",
        discussion: """
            With one report directory, writes DIR/report.html from DIR/summary.json and DIR/timeline.jsonl \
            (roam run writes it too). With two, writes one page with both runs on one time axis and their \
            figures side by side (default: comparison.html in the current directory). The pages are \
            self-contained: open them from disk or attach them to a CI run.
            """
    )

    @Argument(help: ArgumentHelp("One report directory, or two to compare.", valueName: "dir"))
    var directories: [String]

    @Option(name: [.short, .long], help: ArgumentHelp("Where to write the page (default: DIR/report.html, or comparison.html for two runs).", valueName: "file"))
    var output: String?

    func validate() throws {
        guard (1...2).contains(directories.count) else { throw ValidationError("name one report directory, or two to compare") }
    }

    func run() throws {
        do throws(ReportError) {
            let (html, notes) = try HTMLReport.page(directories: directories)
            for note in notes { printError("roam report: note: \(note)") }
            let path = output ?? (directories.count == 1 ? directories[0] + "/report.html" : "comparison.html")
            try writeTextFile(html, to: path)
            writeLine(path)
        } catch {
            printError("roam report: \(error.message)")
            throw ExitCode.badInput
        }
    }
}
