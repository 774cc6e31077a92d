"""The one YAML loader (envkit.state.yamltext.parse_yaml) every reader uses: duplicate keys refused (in every file
envkit reads), merge keys kept working, numbers that remember how they were written."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import yaml

from envkit.state.yamltext import YamlFloat, parse_yaml
from envkit.versions import quote_it


def error(text: str) -> str:
    with pytest.raises(ValueError) as caught:
        parse_yaml(text)
    return str(caught.value)


def test_a_key_given_twice_is_refused_with_both_lines():
    assert error("a: 1\nb: 2\na: 3\n") == "duplicate key 'a' at line 3 (first at line 1)"
    assert error("top:\n  x: 1\n  y: 2\n  x: 1\n") == "duplicate key 'x' at line 4 (first at line 2)"


def test_on_one_line_the_columns_tell_them_apart():
    text = '{"gpus": [], "gpus": 3}'
    second = text.rindex('"gpus"') + 1  # columns count from 1
    assert error(text) == f"duplicate key 'gpus' at line 1, column {second} (first at column 2)"


def test_keys_are_compared_as_yaml_reads_them():
    assert error("1: a\n+1: b\n") == "duplicate key 1 at line 2 (first at line 1)"
    assert parse_yaml("'1': a\n1: b\n") == {"1": "a", 1: "b"}  # text and a number are two keys


def test_merge_keys_and_their_overrides_are_not_duplicates():
    assert parse_yaml("base: &b {k: 1, j: 1}\nx:\n  <<: *b\n  k: 2\n") == {"base": {"k": 1, "j": 1},
                                                                           "x": {"k": 2, "j": 1}}
    # A mapping that merges and is then merged elsewhere (the loader that catalog/load.py had took the first
    # mapping, once expanded by the second merge, for one with a key given twice).
    text = "a:\n  x: &x\n    <<: {k: 1}\n    k: 2\ny:\n  <<: *x\n  j: 3\n"
    assert parse_yaml(text) == {"a": {"x": {"k": 2}}, "y": {"k": 2, "j": 3}}
    assert parse_yaml("x: &a {p: 1}\ny: *a\nz: *a\n") == {"x": {"p": 1}, "y": {"p": 1}, "z": {"p": 1}}


def test_a_syntax_error_names_line_and_column():
    assert error("a: [1\n") == "did not find expected ',' or ']' at line 2, column 1"


def test_the_c_loader_is_used_where_pyyaml_has_one():
    from envkit.state.yamltext import _loader

    assert issubclass(_loader(), getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def test_a_number_keeps_its_text_as_written():
    value = parse_yaml("v: 12.10\n")["v"]
    assert isinstance(value, YamlFloat) and value == 12.1
    assert (str(value), f"{value}", repr(value), json.dumps(value)) == ("12.10", "12.10", "12.1", "12.1")
    again = pickle.loads(pickle.dumps(value))  # envkit.state.filecache keeps parsed files
    assert again == 12.1 and str(again) == "12.10"


@pytest.mark.parametrize("text, message", [
    ("12.10", 'YAML reads 12.10 as the number 12.1'),
    ("560.30", 'YAML reads 560.30 as the number 560.3'),
    ("9.0", 'unquoted, YAML reads it as a number (and 12.10 as 12.1)'),
    ("550", 'unquoted, YAML reads it as a number (and 12.10 as 12.1)'),
])
def test_quote_it_quotes_what_was_written(text, message):
    assert quote_it(parse_yaml(f"v: {text}")["v"]) == f'{text} must be quoted ("{text}"): {message}'


@pytest.mark.parametrize("value", ["text", "12.10", True, None])
def test_quote_it_has_nothing_to_say_of_what_is_not_a_number(value):
    assert quote_it(value) is None


# --- a number is written in plain decimal ------------------------------------------------------------------------

@pytest.mark.parametrize("written, how", [
    ("010", "the octal number 8"),  # JSON and YAML 1.2: 10
    ("-010", "the octal number -8"),
    ("00", "the octal number 0"),
    ("0x1f", "the hexadecimal number 31"),
    ("0b101", "the binary number 5"),
    ("1_000", "the number 1000"),  # YAML 1.2: the text "1_000"
    ("1:30", "the base-60 number 90"),  # a Slurm time limit, read as 90
    ("1_000.5", "the number 1000.5"),
    ("1:30.5", "the base-60 number 90.5"),
])
def test_a_number_not_written_in_plain_decimal_is_refused_with_its_line(written, how):
    assert error(f"name: x\ncount: {written}\n") == (
        f"the number {written} at line 2, column 8: YAML reads it as {how}; write numbers in plain decimal digits, "
        f'or quote text ("{written}")')


def test_a_key_or_a_json_value_in_octal_is_refused_too_and_plain_numbers_and_text_read_as_before():
    assert error("min_driver:\n  012: '525'\n").startswith("the number 012 at line 2, column 3: ")
    assert error('{"gpus": [], "index": 010}').startswith("the number 010 at line 1, column 23: YAML reads it as the "
                                                          "octal number 8;")
    plain = {"0": 0, "-0": 0, "+5": 5, "10": 10, "-3": -3, "010.5": 10.5, "0.5": 0.5, "1.0e+3": 1000.0,
             "'010'": "010", '"1:30"': "1:30", "0o17": "0o17"}  # (0o17 is YAML 1.2's octal, text to YAML 1.1)
    assert [parse_yaml(f"v: {written}\n")["v"] for written in plain] == list(plain.values())


# --- every reader refuses a key given twice -----------------------------------------------------------------------

def test_the_config_refuses_a_key_given_twice(tmp_path: Path):
    from envkit.state.config import ConfigError, parse_config

    path = tmp_path / "config.yaml"
    with pytest.raises(ConfigError) as caught:
        parse_config("site: /a/site.yaml\nsite: /b/site.yaml\n", path)
    assert caught.value.message == f"{path}: not valid YAML: duplicate key 'site' at line 2 (first at line 1)"
    assert caught.value.exit_code == 2


def test_the_config_file_refuses_a_key_given_twice(tmp_path: Path):
    from envkit.state.config import ConfigError, load_config
    from envkit.state.userdirs import user_dirs

    path = tmp_path / "config.yaml"
    path.write_text("envs_dir: /a\nenvs_dir: /b\n")
    with pytest.raises(ConfigError, match="duplicate key 'envs_dir' at line 2"):
        load_config({"ENVKIT_CONFIG": str(path)}, user_dirs({"HOME": str(tmp_path / "home")}))


def test_a_lock_file_refuses_a_key_given_twice():
    from envkit.lockfile.format import LockFileError, parse_lock

    with pytest.raises(LockFileError, match="duplicate key 'version' at line 2 \\(first at line 1\\)") as caught:
        parse_lock("version: 1\nversion: 1\nmetadata: {}\npackage: []\n", "conda-lock.yml")
    assert caught.value.exit_code == 2


def test_the_catalog_and_the_other_readers_share_the_loader():
    from envkit.catalog import load as catalog_load

    from envkit.maintain import validate

    assert catalog_load.parse_yaml is parse_yaml
    assert "from envkit.state.yamltext import parse_yaml" in Path(validate.__file__).read_text()


def test_the_caches_of_parsed_files_name_the_loader():
    """A change to the loader must invalidate what was parsed with it (envkit.state.filecache keys on the code)."""
    from envkit.catalog.cache import _CODE

    assert "state/yamltext.py" in _CODE and "catalog/load.py" in _CODE and "machines/gpu_names.py" in _CODE
    package = Path(__file__).resolve().parents[1] / "envkit"
    for module in ("machines/profile.py", "site/read.py", "state/config.py", "machines/fleet.py", "lockfile/format.py"):
        source = (package / module).read_text()
        assert "parse_yaml" not in source or '"state/yamltext.py"' in source, module


def test_the_merge_rule_is_envkits_own_not_the_installed_pyyamls(monkeypatch):
    # PyYAML 6.0.4 changed flatten_mapping and read y.k below as 1; envkit's loader never calls PyYAML's.
    from envkit.state import yamltext

    def refuse(*_args):
        raise AssertionError("PyYAML's flatten_mapping was called")

    base = yamltext._loader().__mro__[1]
    monkeypatch.setattr(base, "flatten_mapping", refuse)
    text = "a:\n  x: &x\n    <<: {k: 1}\n    k: 2\ny:\n  <<: *x\n  j: 3\n"
    assert parse_yaml(text) == {"a": {"x": {"k": 2}}, "y": {"k": 2, "j": 3}}


def test_among_merged_mappings_the_first_listed_wins_and_own_keys_win_over_all():
    text = "a: &a {k: 1}\nb: &b {k: 2, j: 2}\nc: {<<: [*a, *b]}\nd: {<<: [*a, *b], j: 3}\n"
    assert parse_yaml(text)["c"] == {"k": 1, "j": 2}
    assert parse_yaml(text)["d"] == {"k": 1, "j": 3}
    # the order of the keys: merged ones first, then the mapping's own
    assert list(parse_yaml("a: &a {m: 1}\nb: {z: 0, <<: *a}\n")["b"]) == ["m", "z"]


def test_merging_what_is_not_a_mapping_is_an_error_with_its_place():
    assert error("a: {<<: [1]}\n") == ("expected a mapping or list of mappings for merging, but found scalar "
                                       "at line 1, column 10")


def test_an_alias_bomb_is_refused_before_anything_is_built():
    # nine levels of nine aliases: 9**10 (3.4 billion) nodes once expanded, from a text of 400 bytes
    names = "abcdefghij"
    text = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{names[i + 1]}: &{names[i + 1]} [{', '.join([f'*{names[i]}'] * 9)}]\n" for i in range(9))
    assert error(text) == ("the aliases of this document expand to more than 1,000,000 nodes (at line 7); "
                           "write the values out, or use fewer aliases")


def test_a_few_aliases_of_a_large_mapping_are_fine():
    big = ", ".join(f"k{i}: {i}" for i in range(20_000))
    data = parse_yaml(f"a: &a {{{big}}}\nb: *a\nc: *a\n")
    assert data["b"]["k19999"] == 19999 and data["c"] is data["a"]


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n", "a: &a {b: [1, {c: *a}]}\n"])
def test_a_recursive_alias_is_refused(text):
    assert error(text) == "the mapping or sequence at line 1 holds an alias of itself (a recursive alias)"


@pytest.mark.parametrize("depth", [250, 100_000])
def test_deep_nesting_is_one_error_not_a_recursion_error(depth):
    # 100,000 levels crashed libyaml's composer (a segmentation fault) before PyYAML 6.0.4
    assert error("[" * depth + "]" * depth).startswith("the document nests deeper than 200 levels")
