#!/usr/bin/env python3
"""Tests of scripts/api-check.py's rule, on dumps made here in swift-api-digester's format: an
addition, a removal or a break fails the check unless CHANGELOG.md's Unreleased section names it
(or a declaration that holds it). `make api-check` runs these first.

  python3 scripts/test_api_check.py
"""
import importlib.util
import json
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("api_check", os.path.join(HERE, "api-check.py"))
api_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(api_check)


def declaration(kind, name, usr, children=(), internal=False):
    node = {"kind": kind, "name": name, "printedName": name, "usr": usr, "children": list(children)}
    if internal:
        node["isInternal"] = True
    return node


def dump(*children):
    """A file in the digester's dump format with these top-level declarations; its path."""
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"ABIRoot": {"kind": "Root", "name": "TopLevel", "printedName": "TopLevel", "children": list(children)}}, handle)
    handle.close()
    return handle.name


PATH = declaration("TypeDecl", "NetworkPath", "s:NP", [declaration("Var", "isExpensive", "s:NP.e")])
PATH_GROWN = declaration("TypeDecl", "NetworkPath", "s:NP", [declaration("Var", "isExpensive", "s:NP.e"),
                                                            declaration("Var", "isUltraConstrained", "s:NP.u")])
HELPER = declaration("TypeDecl", "WiFiRates", "s:WR", [declaration("Func", "rate(for:)", "s:WR.r")])


class APICheckTests(unittest.TestCase):
    def tearDown(self):
        for path in getattr(self, "paths", []):
            os.unlink(path)

    def unrecorded(self, before, now, changelog, breaks=()):
        self.paths = [dump(*before), dump(*now)]
        found = api_check.changes("PathMonitor", api_check.public_declarations(self.paths[0]),
                                  api_check.public_declarations(self.paths[1]), list(breaks))
        names = api_check.unreleased_names(changelog)
        return [(kind, name) for kind, name, _ in found if not api_check.is_recorded(name, names)]

    def test_an_unrecorded_addition_fails(self):
        self.assertEqual(self.unrecorded([PATH], [PATH_GROWN], "# Changelog\n\n## Unreleased\n\nNothing yet.\n"),
                         [("added", "PathMonitor.NetworkPath.isUltraConstrained")])

    def test_a_module_named_alone_records_everything_in_it(self):
        names = api_check.unreleased_names("## Unreleased\n- `RoamDecisions`, a module of its own.\n## 0.3.0\n")
        self.assertTrue(api_check.is_recorded("RoamDecisions.HandoverSession.handle(_:)", names))
        self.assertFalse(api_check.is_recorded("RoamDecisionsExtra.Thing", names))
        self.assertFalse(api_check.is_recorded("Multipath.HandoverSession", names))

    def test_a_declaration_that_only_names_a_moved_type_did_not_change(self):
        before, now = {"s:old": "RunningNetwork.currentPath(of:)"}, {"s:new": "RunningNetwork.currentPath(of:)"}
        self.assertEqual(api_check.changes("Simulator", before, now, [], {"s:old": "NetworkPath?, String"}, {"s:new": "NetworkPath?, String"}), [])
        # The same name with other types is a removal and an addition.
        found = api_check.changes("Simulator", before, now, [], {"s:old": "NetworkPath?, String"}, {"s:new": "NetworkPath?, Int"})
        self.assertEqual(sorted(kind for kind, _, _ in found), ["added", "removed"])

    def test_an_addition_named_in_the_unreleased_section_passes(self):
        changelog = "## Unreleased\n- `PathMonitor.NetworkPath.isUltraConstrained`: satellite links.\n## 0.3.0\n"
        self.assertEqual(self.unrecorded([PATH], [PATH_GROWN], changelog), [])

    def test_a_new_type_named_records_its_members(self):
        changelog = "## Unreleased\n- `PathMonitor.WiFiRates`\n"
        self.assertEqual(self.unrecorded([PATH], [PATH, HELPER], changelog), [])

    def test_a_name_that_only_begins_the_same_records_nothing(self):
        changelog = "## Unreleased\n- `PathMonitor.WiFi`\n"
        self.assertEqual(self.unrecorded([PATH], [PATH, HELPER], changelog),
                         [("added", "PathMonitor.WiFiRates"), ("added", "PathMonitor.WiFiRates.rate(for:)")])

    def test_a_name_in_a_released_section_does_not_record_a_change_now(self):
        changelog = "## Unreleased\n\n## 0.3.0\n- `PathMonitor.NetworkPath.isUltraConstrained`\n"
        self.assertEqual(self.unrecorded([PATH], [PATH_GROWN], changelog), [("added", "PathMonitor.NetworkPath.isUltraConstrained")])

    def test_a_name_in_a_code_block_records_nothing(self):
        changelog = "## Unreleased\n```swift\nlet x = `PathMonitor.NetworkPath.isUltraConstrained`\n```\n"
        self.assertEqual(len(self.unrecorded([PATH], [PATH_GROWN], changelog)), 1)

    def test_a_removal_and_a_break_must_be_recorded_too(self):
        breaks = ["Var NetworkPath.isExpensive has declared type change from Swift.Bool to Swift.Int"]
        self.assertEqual(self.unrecorded([PATH_GROWN], [PATH], "## Unreleased\n", breaks),
                         [("changed", "PathMonitor.NetworkPath.isExpensive"), ("removed", "PathMonitor.NetworkPath.isUltraConstrained")])
        changelog = "## Unreleased\n- `PathMonitor.NetworkPath.isExpensive` is a count.\n- `PathMonitor.NetworkPath.isUltraConstrained` removed.\n"
        self.assertEqual(self.unrecorded([PATH_GROWN], [PATH], changelog, breaks), [])

    def test_package_declarations_are_not_api(self):
        hidden = declaration("TypeDecl", "Internal", "s:I", [declaration("Var", "x", "s:I.x")], internal=True)
        self.assertEqual(self.unrecorded([PATH], [PATH, hidden], "## Unreleased\n"), [])


if __name__ == "__main__":
    unittest.main()
