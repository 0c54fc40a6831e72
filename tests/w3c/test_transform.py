"""Unit tests for ``tools/w3c/transform.py`` (the conf: -> Python-datamodel transform)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from defusedxml import ElementTree as DefusedET

from tools.w3c.corpus import corpus_dir, require_corpus
from tools.w3c.manifest import load_manifest, skip_reason
from tools.w3c.transform import (
    CONF_ATTRIBUTES,
    CONF_ELEMENTS,
    CONF_NS,
    SCXML_NS,
    TransformError,
    main,
    transform,
    transform_file,
)

require_corpus()

CORPUS = corpus_dir()
TEMPLATES = sorted(CORPUS.glob("*.txml"))
S = "{" + SCXML_NS + "}"
C = "{" + CONF_NS + "}"
TEXT_ELEMENTS = {"array123", "someInlineVal"}  # conf elements rendered as text

HEAD = (
    '<scxml xmlns="http://www.w3.org/2005/07/scxml" '
    'xmlns:conf="http://www.w3.org/2005/scxml-conformance" version="1.0" conf:datamodel="">'
)


def doc(body: str) -> str:
    """A minimal template around ``body``."""
    return f'<?xml version="1.0"?>\n{HEAD}{body}</scxml>'


def parse(text: str) -> ET.Element:
    """Parse XML text, keeping comments and processing instructions."""
    parser = DefusedET.XMLParser(target=ET.TreeBuilder(insert_comments=True, insert_pis=True))
    parser.feed(text)
    return parser.close()


def rendered_attr(snippet: str) -> dict[str, str]:
    """Attributes of a ``<x .../>`` element holding ``snippet`` after the transform."""
    root = parse(transform(doc(f"<state id='s'><transition {snippet}/></state>")))
    transition = root.find(f"{S}state/{S}transition")
    assert transition is not None
    return dict(transition.attrib)


def test_corpus_is_present() -> None:
    assert len(TEMPLATES) == 237, f"expected 237 .txml files in {CORPUS}"


# --------------------------------------------------------------------------------------
# The whole corpus
# --------------------------------------------------------------------------------------


def _assert_same_markup(before: ET.Element, after: ET.Element, where: str) -> None:
    """``after`` is ``before`` with only its conf: markup replaced."""
    assert after.tag == before.tag, where
    plain = {k: v for k, v in before.attrib.items() if not k.startswith(C)}
    assert {k: after.attrib.get(k) for k in plain} == plain, where
    assert len(after.attrib) == len(before.attrib), f"{where}: one attribute per conf: attribute"
    kept = [
        child
        for child in before
        if not (isinstance(child.tag, str) and child.tag[len(C) :] in TEXT_ELEMENTS)
    ]
    assert len(after) == len(kept), where
    if len(kept) == len(before):  # no text substitution: all text is unchanged
        assert (after.text or "") == (before.text or ""), where
    for old, new in zip(kept, after, strict=True):
        if len(kept) == len(before):
            assert (new.tail or "") == (old.tail or ""), where
        if not isinstance(old.tag, str):
            assert new.tag is old.tag, where
            assert new.text == old.text, where
        elif old.tag.startswith(C):
            assert isinstance(new.tag, str), where
            assert new.tag.startswith(S), where
        else:
            _assert_same_markup(old, new, f"{where}/{old.tag.split('}')[-1]}")


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_every_template_transforms(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    output = transform(source)
    assert CONF_NS not in output
    assert "xmlns:conf" not in output
    assert "ns0:" not in output
    assert output.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = parse(output)
    assert root.tag == f"{S}scxml"
    for element in root.iter():
        if isinstance(element.tag, str):
            assert not element.tag.startswith(C)
            assert not any(key.startswith("{") for key in element.attrib), element.attrib
    before = parse(source)
    _assert_same_markup(before, root, path.stem)
    # every conf:pass / conf:fail became the outcome final state
    assert len(root.findall(f".//{S}final[@id='pass']")) >= source.count("<conf:pass/>")
    assert len(root.findall(f".//{S}final[@id='fail']")) >= source.count("<conf:fail/>")


def test_every_conf_name_in_the_corpus_is_known() -> None:
    elements: set[str] = set()
    attributes: set[str] = set()
    for path in TEMPLATES:
        for element in parse(path.read_text(encoding="utf-8")).iter():
            if isinstance(element.tag, str):
                if element.tag.startswith(C):
                    elements.add(element.tag[len(C) :])
                attributes.update(k[len(C) :] for k in element.attrib if k.startswith(C))
    assert len(elements) == 11
    assert elements <= CONF_ELEMENTS
    assert len(attributes) == 78
    assert attributes <= CONF_ATTRIBUTES


def _python_documents() -> list[Path]:
    runnable = [c for c in load_manifest() if skip_reason(c) is None]
    names = {name for case in runnable for name in (*case.starts, *case.deps)}
    return [CORPUS / name for name in sorted(names) if name.endswith(".txml")]


EXPRESSION_ATTRIBUTES = (
    "expr",
    "cond",
    "location",
    "targetexpr",
    "eventexpr",
    "typeexpr",
    "delayexpr",
    "srcexpr",
    "sendidexpr",
    "idlocation",
    "array",
    "item",
    "index",
)


@pytest.mark.parametrize("path", _python_documents(), ids=lambda p: p.stem)
def test_expressions_of_runnable_documents_are_python(path: Path) -> None:
    """Every expression in a document we run parses as Python (our engine checks at load)."""
    root = parse(transform_file(path))
    for element in root.iter():
        if not isinstance(element.tag, str) or not element.tag.startswith(S):
            continue
        for name in EXPRESSION_ATTRIBUTES:
            value = element.get(name)
            if value is not None:
                compile(value, f"{path.stem} {name}", "eval")
        if element.tag == f"{S}script" and element.text:
            compile(element.text, f"{path.stem} script", "exec")
        if element.tag == f"{S}scxml" and element.get("datamodel") is not None:
            assert element.get("datamodel") in ("python", "null")


def test_test436_keeps_null_datamodel() -> None:
    root = parse(transform_file(CORPUS / "test436.txml"))
    assert root.get("datamodel") == "null"


def test_nested_documents_are_transformed() -> None:
    root = parse(transform_file(CORPUS / "test224.txml"))
    nested = root.find(f".//{S}invoke/{S}content/{S}scxml")
    assert nested is not None
    assert nested.get("datamodel") == "python"
    transition = root.find(f"{S}state[@id='s1']/{S}transition")
    assert transition is not None
    assert transition.get("cond") == "str(Var1).startswith(str(Var2))"


def test_no_namespace_content_stays_out_of_the_scxml_namespace() -> None:
    output = transform_file(CORPUS / "test557.txml")
    assert '<books xmlns="">' in output
    root = parse(output)
    assert root.find(f"{S}datamodel/{S}data/books") is not None


def test_comments_and_prolog_are_kept() -> None:
    output = transform_file(CORPUS / "test152.txml")
    assert output.splitlines()[1].startswith("<!-- test that an illegal array")
    assert "<!-- invalid array, legal item -->" in output


# --------------------------------------------------------------------------------------
# Attribute renderings
# --------------------------------------------------------------------------------------

ATTRIBUTE_CASES = [
    # outcome, datamodel, names, locations
    ('conf:targetpass=""', "target", "pass"),
    ('conf:targetfail=""', "target", "fail"),
    ('conf:id="3"', "id", "Var3"),
    ('conf:name="1"', "name", "Var1"),
    ('conf:location="2"', "location", "Var2"),
    ('conf:systemVarLocation="_sessionid"', "location", "_sessionid"),
    ('conf:invalidLocation="foo"', "location", "foo.bar.baz"),
    ('conf:idlocation="1"', "idlocation", "Var1"),
    ('conf:namelist="2"', "namelist", "Var2"),
    ('conf:invalidNamelist=""', "namelist", "undeclared_location"),
    ('conf:item="2"', "item", "Var2"),
    ('conf:illegalItem=""', "item", "_sessionid"),
    ('conf:index="3"', "index", "Var3"),
    ('conf:arrayVar="5"', "array", "Var5"),
    ('conf:arrayTextVar="4"', "array", "Var4"),
    ('conf:targetVar="1"', "targetexpr", "Var1"),
    ('conf:targetExpr="1"', "targetexpr", "Var1"),
    ('conf:typeExpr="1"', "typeexpr", "Var1"),
    ('conf:eventExpr="1"', "eventexpr", "Var1"),
    ('conf:delayFromVar="1"', "delayexpr", "Var1"),
    ('conf:delay="1.5"', "delayexpr", "'1.5s'"),
    ('conf:delay=".5"', "delayexpr", "'.5s'"),
    ('conf:sendIDExpr="1"', "sendidexpr", "Var1"),
    ('conf:srcExpr="1"', "srcexpr", "Var1"),
    ('conf:illegalTarget=""', "target", "baz"),
    ('conf:unreachableTarget=""', "target", "#_scxml_foo"),
    ('conf:invalidSendType=""', "type", "27"),
    (
        'conf:basicHTTPAccessURITarget=""',
        "targetexpr",
        "_ioprocessors['basichttp']['location']",
    ),
    ('conf:scriptBadSrc=""', "src", "file:no-such-script.py"),
    # value expressions
    ('conf:expr="0"', "expr", "0"),
    ('conf:expr="_event"', "expr", "_event"),
    ('conf:quoteExpr="#_scxml_"', "expr", "'#_scxml_'"),
    ('conf:quoteExpr="file:test216sub1.scxml"', "expr", "'file:test216sub1.scxml'"),
    ('conf:varExpr="2"', "expr", "Var2"),
    ('conf:varChildExpr="1"', "expr", "Var1"),
    ('conf:systemVarExpr="_ioprocessors"', "expr", "_ioprocessors"),
    ('conf:varNonexistentStruct="1"', "expr", "Var1.bar"),
    ('conf:illegalExpr=""', "expr", "1 // 0"),
    ('conf:illegalArray=""', "expr", "7"),
    ('conf:invalidSessionID=""', "expr", "27"),
    ('conf:invalidSendTypeExpr=""', "expr", "27"),
    ('conf:eventName=""', "expr", "_event.name"),
    ('conf:eventType=""', "expr", "_event.type"),
    ('conf:eventSendid=""', "expr", "_event.sendid"),
    ('conf:eventField="origintype"', "expr", "_event.origintype"),
    ('conf:eventRaw=""', "expr", "_event.raw"),
    ('conf:eventDataFieldValue="aParam"', "expr", "_event.data['aParam']"),
    ('conf:eventDataParamValue="param1"', "expr", "_event.data['param1']"),
    ('conf:eventDataNamelistValue="1"', "expr", "_event.data['Var1']"),
    (
        'conf:scxmlEventIOLocation=""',
        "expr",
        "_ioprocessors['http://www.w3.org/TR/scxml/#SCXMLEventProcessor']['location']",
    ),
    # conditions
    ('conf:true=""', "cond", "True"),
    ('conf:false=""', "cond", "False"),
    ('conf:idVal="1=1"', "cond", "Var1 == 1"),
    ('conf:idVal="4=0"', "cond", "Var4 == 0"),
    ('conf:idVal="1!=2"', "cond", "Var1 != 2"),
    ('conf:idVal="1&gt;2"', "cond", "Var1 > 2"),
    ('conf:idQuoteVal="1=foo"', "cond", "Var1 == 'foo'"),
    (
        'conf:idQuoteVal="2=http://www.w3.org/TR/scxml/#SCXMLEventProcessor"',
        "cond",
        "Var2 == 'http://www.w3.org/TR/scxml/#SCXMLEventProcessor'",
    ),
    ('conf:idSomeVal="1"', "cond", "Var1 == 123"),
    ('conf:idSystemVarVal="1=_sessionid"', "cond", "Var1 == _sessionid"),
    ('conf:namelistIdVal="1=1"', "cond", "Var1 == 1"),
    ('conf:VarEqVar="1 2"', "cond", "Var1 == Var2"),
    ('conf:VarEqVarStruct="1 2"', "cond", "Var1 == Var2"),
    ('conf:compareIDVal="1&lt;2"', "cond", "Var1 < Var2"),
    ('conf:varPrefix="2 1"', "cond", "str(Var1).startswith(str(Var2))"),
    ('conf:isBound="4"', "cond", "Var4 is not None"),
    ('conf:unboundVar="1"', "cond", "Var1 is None"),
    ('conf:noValue="2"', "cond", "not Var2"),
    ('conf:systemVarIsBound="_event"', "cond", "_event is not None"),
    ('conf:nonBoolean=""', "cond", "1 // 0 == 0"),
    ('conf:inState="s1"', "cond", "In('s1')"),
    ('conf:nameVarVal="machineName"', "cond", "_name == 'machineName'"),
    ('conf:eventNameVal="foo"', "cond", "_event.name == 'foo'"),
    ('conf:eventvarVal="1=1"', "cond", "_event.data['Var1'] == 1"),
    ('conf:eventdataVal="123"', "cond", "_event.data == 123"),
    ("conf:eventdataVal=\"'foo'\"", "cond", "_event.data == 'foo'"),
    ('conf:eventdataVal="foo"', "cond", "_event.data == 'foo'"),
    ('conf:eventdataSomeVal=""', "cond", "_event.data == 123"),
    ('conf:emptyEventData=""', "cond", "_event.data is None"),
    (
        'conf:eventFieldsAreBound=""',
        "cond",
        "'name' in _event and 'type' in _event and 'sendid' in _event and 'origin' in _event"
        " and 'origintype' in _event and 'invokeid' in _event and 'data' in _event",
    ),
    ('conf:eventFieldHasNoValue="sendid"', "cond", "_event.sendid is None"),
    (
        'conf:originTypeEq="http://www.w3.org/TR/scxml/#SCXMLEventProcessor"',
        "cond",
        "_event.origintype == 'http://www.w3.org/TR/scxml/#SCXMLEventProcessor'",
    ),
    ('conf:methodIsPost=""', "cond", "'POST' in _event.raw"),
    ('conf:eventIdParamHasValue="1 2"', "cond", "'Var1=2' in _event.raw"),
    ('conf:eventNamedParamHasValue="param1 1"', "cond", "'param1=1' in _event.raw"),
    (
        'conf:messageBodyEquals="this+is+some+content"',
        "cond",
        "'this+is+some+content' in _event.raw",
    ),
]


@pytest.mark.parametrize(("snippet", "attribute", "value"), ATTRIBUTE_CASES)
def test_attribute_rendering(snippet: str, attribute: str, value: str) -> None:
    assert rendered_attr(snippet) == {attribute: value}
    if attribute in EXPRESSION_ATTRIBUTES:
        compile(value, snippet, "eval")


def test_attribute_table_covers_every_conf_attribute() -> None:
    tested = {snippet.split("=")[0].removeprefix("conf:") for snippet, _, _ in ATTRIBUTE_CASES}
    assert tested | {"datamodel"} == CONF_ATTRIBUTES


def test_datamodel_becomes_python_and_attribute_order_is_kept() -> None:
    root = parse(transform(doc("")))
    assert list(root.attrib.items()) == [("version", "1.0"), ("datamodel", "python")]
    first_line = transform(doc("")).splitlines()[1]
    assert first_line.startswith(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"'
    )


def test_conf_attribute_keeps_its_position() -> None:
    attrs = rendered_attr('event="a" conf:targetpass="" type="internal"')
    assert list(attrs) == ["event", "target", "type"]


# --------------------------------------------------------------------------------------
# Element renderings
# --------------------------------------------------------------------------------------


def test_pass_and_fail() -> None:
    output = transform(doc("<conf:pass/><conf:fail/>"))
    assert (
        '<final id="pass"><onentry><log label="Outcome" expr="\'pass\'"/></onentry></final>'
        in output
    )
    assert (
        '<final id="fail"><onentry><log label="Outcome" expr="\'fail\'"/></onentry></final>'
        in output
    )


@pytest.mark.parametrize(
    ("markup", "expected"),
    [
        ('<conf:incrementID id="1"/>', '<assign location="Var1" expr="Var1 + 1"/>'),
        ('<conf:sumVars id1="1" id2="2"/>', '<assign location="Var1" expr="Var1 + Var2"/>'),
        ('<conf:concatVars id1="1" id2="2"/>', '<assign location="Var1" expr="Var1 + Var2"/>'),
        ('<conf:extendArray id="1"/>', '<assign location="Var1" expr="Var1 + [4]"/>'),
        ("<conf:contentFoo/>", "<content>foo</content>"),
        ("<conf:script/>", "<script>Var1 = 1</script>"),
        (
            '<conf:sendToSender name="bar"/>',
            '<send event="bar" targetexpr="_event.origin" typeexpr="_event.origintype"/>',
        ),
    ],
)
def test_element_rendering(markup: str, expected: str) -> None:
    output = transform(doc(f"<onentry> {markup} </onentry>"))
    assert f"<onentry> {expected} </onentry>" in output


@pytest.mark.parametrize(("name", "text"), [("array123", "[1,2,3]"), ("someInlineVal", "123")])
def test_text_elements(name: str, text: str) -> None:
    output = transform(doc(f'<datamodel><data conf:id="1">\n  <conf:{name}/>\n</data></datamodel>'))
    assert f'<data id="Var1">\n  {text}\n</data>' in output
    between = transform(doc(f"<assign>a<!--c--><conf:{name}/>b</assign>"))
    assert f"<assign>a<!--c-->{text}b</assign>" in between


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "<conf:noSuchElement/>",
        '<state conf:noSuchAttribute="1"/>',
        '<data conf:id="x"/>',  # not a variable number
        '<data conf:id=""/>',
        '<transition conf:idVal="1"/>',  # no operator
        '<transition conf:VarEqVar="1"/>',  # one variable only
        '<transition cond="x" conf:true=""/>',  # cond set twice
        '<transition conf:true="" conf:false=""/>',
        "<conf:incrementID/>",  # missing id
        '<conf:incrementID id="1" extra="2"/>',
        '<conf:pass id="x"/>',
        "<conf:pass>text</conf:pass>",
        '<assign conf:eventField="nosuchfield"/>',
        '<send conf:delay="soon"/>',
        '<assign conf:systemVarLocation="Var1"/>',
    ],
)
def test_invalid_conf_markup_raises(body: str) -> None:
    with pytest.raises(TransformError):
        transform(doc(body))


def test_unknown_foreign_attribute_raises() -> None:
    with pytest.raises(TransformError):
        transform(doc('<state xmlns:x="urn:x" x:y="1"/>'))


def test_malformed_xml_raises() -> None:
    with pytest.raises(ET.ParseError):
        transform("<scxml")


def test_markup_without_conf_is_unchanged() -> None:
    source = (
        '<?xml version="1.0"?>\n<!-- head -->\n'
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python">\n'
        "  <?pi some data?>\n"
        '  <state id="s" xml:lang="en"><onentry><log expr="&quot;a&lt;b&quot; + \'&amp;\'"/>'
        "</onentry></state>\n"
        '  <datamodel><data id="x"><foo xmlns="" a="1&#10;2">t &lt; &amp; &gt;</foo></data>'
        "</datamodel>\n"
        "</scxml>\n<!-- tail -->"
    )
    output = transform(source)
    assert ET.canonicalize(output, with_comments=True) == ET.canonicalize(
        source, with_comments=True
    )
    assert output.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<!-- head -->\n<scxml')
    assert output.endswith("</scxml>\n<!-- tail -->\n")


def test_cli_writes_every_document(tmp_path: Path) -> None:
    assert main([str(tmp_path / "out")]) == 0
    written = sorted(p.name for p in (tmp_path / "out").glob("*.scxml"))
    assert written == sorted(f"{p.stem}.scxml" for p in TEMPLATES)
    assert (tmp_path / "out" / "test552.txt").read_text() == (CORPUS / "test552.txt").read_text()
    for path in (tmp_path / "out").glob("*.scxml"):
        DefusedET.fromstring(path.read_bytes())


# --------------------------------------------------------------------------------------
# The ECMAScript profile
# --------------------------------------------------------------------------------------


def ecma_attr(snippet: str) -> dict[str, str]:
    """Attributes of a transition holding ``snippet`` after the ECMAScript rendering."""
    text = transform(doc(f"<state id='s'><transition {snippet}/></state>"), "ecmascript")
    transition = parse(text).find(f"{S}state/{S}transition")
    assert transition is not None
    return dict(transition.attrib)


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_every_template_renders_for_ecmascript(path: Path) -> None:
    output = transform(path.read_text(encoding="utf-8"), "ecmascript")
    assert CONF_NS not in output
    root = parse(output)
    assert root.get("datamodel") in ("ecmascript", "null", "xpath", None)


@pytest.mark.parametrize(
    ("snippet", "attribute", "value"),
    [
        ('conf:datamodel=""', "datamodel", "ecmascript"),
        ('conf:true=""', "cond", "true"),
        ('conf:idVal="1=1"', "cond", "Var1==1"),
        ('conf:idVal="4&gt;0"', "cond", "Var4>0"),
        ('conf:idQuoteVal="1=foo"', "cond", "Var1=='foo'"),
        ('conf:namelistIdVal="1=1"', "cond", "Var1===1"),
        ('conf:VarEqVar="1 2"', "cond", "Var1===Var2"),
        ('conf:VarEqVarStruct="1 2"', "cond", "Var1==Var2"),
        ('conf:idSystemVarVal="1=_sessionid"', "cond", "Var1==_sessionid"),
        ('conf:idSystemVarVal="2=_event"', "cond", "Var2==_event"),
        ('conf:isBound="4"', "cond", "Var4"),
        ('conf:unboundVar="1"', "cond", "typeof Var1 === 'undefined' "),
        ('conf:nonBoolean=""', "cond", "return"),
        ('conf:illegalExpr=""', "expr", "return"),
        ('conf:illegalItem=""', "item", "'continue'"),
        ('conf:invalidNamelist=""', "namelist", '"foo'),
        ('conf:invalidLocation=""', "location", "foo.bar.baz "),
        ('conf:eventDataFieldValue="aParam"', "expr", "_event.data.aParam"),
        ('conf:emptyEventData=""', "cond", "typeof _event.data === 'undefined'"),
        (
            'conf:varPrefix="2 1"',
            "cond",
            "(function(str, starts){if (starts === '') return true;"
            "if (str == null || starts == null) return false;"
            "str = String(str); starts = String(starts);"
            "return str.length >= starts.length && str.slice(0, starts.length) === starts;})"
            "(Var1, Var2)",
        ),
    ],
)
def test_ecmascript_attribute_rendering(snippet: str, attribute: str, value: str) -> None:
    assert ecma_attr(snippet) == {attribute: value}


def test_ecmascript_elements() -> None:
    body = '<state id="s"><onentry><conf:extendArray id="1"/><conf:script/></onentry></state>'
    root = parse(transform(doc(body), "ecmascript"))
    assign = root.find(f".//{S}assign")
    script = root.find(f".//{S}script")
    assert assign is not None
    assert assign.get("expr") == "[].concat(Var1, [4])"
    assert script is not None
    assert script.text == "var Var1 = 1"


def test_unknown_profile_raises() -> None:
    with pytest.raises(TransformError, match="unknown profile"):
        transform(doc(""), "xpath")
