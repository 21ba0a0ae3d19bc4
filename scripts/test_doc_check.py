#!/usr/bin/env python3
"""Tests of scripts/doc-check.py's rule, on symbols in swift-symbolgraph-extract's format: a
public function's doc comment names each parameter (one by one or in a `- Parameters:` list),
says what it returns unless that is Void, and what it throws when it throws. `make docs` runs
these first.

  python3 scripts/test_doc_check.py
"""
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("doc_check", os.path.join(HERE, "doc-check.py"))
doc_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(doc_check)


def symbol(comment, parameters=(), returns="Void", throws=False, kind="swift.method", title="f(at:)", access="public", module="M"):
    fragments = [{"kind": "keyword", "spelling": "func"}] + ([{"kind": "keyword", "spelling": "throws"}] if throws else [])
    result = {"kind": {"identifier": kind}, "accessLevel": access, "names": {"title": title}, "pathComponents": ["T", title],
              "declarationFragments": fragments,
              "functionSignature": {"parameters": [dict(p) for p in parameters], "returns": [{"kind": "text", "spelling": returns}]},
              "location": {"uri": "file:///x/T.swift", "position": {"line": 9}}}
    if comment is not None:
        result["docComment"] = {"module": module, "lines": [{"text": line} for line in comment.split("\n")]}
    return result


AT = {"name": "at", "internalName": "now"}


class DocCheckTests(unittest.TestCase):
    def lacks(self, *args, **kwargs):
        return doc_check.lacks(symbol(*args, **kwargs))

    def test_a_function_without_a_comment_lacks_one(self):
        self.assertEqual(self.lacks(None, [AT]), ["a doc comment"])

    def test_each_parameter_is_named_by_its_internal_name(self):
        self.assertEqual(self.lacks("Does it.", [AT]), ["- Parameter now:"])
        self.assertEqual(self.lacks("Does it.\n\n- Parameter now: When."), [])
        self.assertEqual(self.lacks("Does it.\n\n- Parameter at: When.", [AT]), ["- Parameter now:"])

    def test_a_parameters_list_counts(self):
        parameters = [AT, {"name": "interface"}]
        comment = "Does it.\n\n- Parameters:\n  - interface: Which.\n  - now: When."
        self.assertEqual(self.lacks(comment, parameters), [])
        self.assertEqual(self.lacks("Does it.\n\n- Parameters:\n  - interface: Which.", parameters), ["- Parameter now:"])

    def test_a_result_that_is_not_void_needs_returns(self):
        self.assertEqual(self.lacks("Says it.", returns="Duration"), ["- Returns:"])
        self.assertEqual(self.lacks("Says it.\n- Returns: How long.", returns="Duration"), [])
        self.assertEqual(self.lacks("Says it.", returns="()"), [])
        self.assertEqual(self.lacks("Makes one.", kind="swift.init", returns="Self"), [], "an initializer returns nothing to document")

    def test_a_throwing_function_needs_throws(self):
        self.assertEqual(self.lacks("Does it.", throws=True), ["- Throws:"])
        self.assertEqual(self.lacks("Does it.\n- Throws: `MultipathError`.", throws=True), [])

    def test_what_a_user_cannot_see_or_a_protocol_documents_is_not_checked(self):
        graph = {"symbols": [symbol(None, access="package"), symbol(None, title="hash(into:)"), symbol(None, module="Swift"),
                             symbol(None, kind="swift.property")]}
        # A comment from another module (Swift's) is that module's; without any comment the
        # symbol is checked.
        graph["symbols"][2]["docComment"] = {"module": "Swift", "lines": [{"text": "Hashes."}]}
        self.assertEqual(doc_check.check("M", graph), ([], 0))
        found, checked = doc_check.check("M", {"symbols": [symbol(None)]})
        self.assertEqual(checked, 1)
        self.assertEqual(len(found), 1)


    def test_a_module_can_be_checked_for_some_types_only(self):
        other = symbol(None)
        other["pathComponents"] = ["Other", "f(at:)"]
        found, checked = doc_check.check("M", {"symbols": [symbol(None), other]}, {"T"})
        self.assertEqual((len(found), checked), (1, 1))


if __name__ == "__main__":
    unittest.main()
