"""Rules consistency: rescore and build-sft-pool say when they classify turns with other rules than their scan used
(real scans of the sample run, real pools, a real rescore through a demo checkpoint)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trajlab.cli import main
from trajlab.curate import PoolOptions, build_sft_pool
from trajlab.rules_match import check_scan_rules, classifier_hash
from trajlab.scan import ScanOptions, scan

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_XML_RUN = ROOT / "sample_data" / "qwen35_xml_run"
PACK = ROOT / "rules" / "user_rules_example"  # adds classifier rules (taxonomy.yaml)
DEMO_CKPT = ROOT / "sample_data" / "demo_checkpoints" / "global_step_140"


@pytest.fixture(scope="module")
def pack_scan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample run scanned with the example user rule pack."""
    out = tmp_path_factory.mktemp("pack_scan") / "out"
    scan([SAMPLE_XML_RUN], out, ScanOptions(rules_dirs=[PACK]), progress=False)
    return out


def _control_only_pack(tmp_path: Path) -> Path:
    """A pack that only changes control tokens: the classifier's rules stay the built-in ones."""
    d = tmp_path / "control_pack"
    d.mkdir()
    (d / "control_tokens.yaml").write_text("thresholds:\n  intrusion: 0.4\n", encoding="utf-8")
    return d


def test_same_rules_match(sample_xml_scan, pack_scan, tmp_path):
    m = check_scan_rules(sample_xml_scan.out, ())
    assert m is not None and m.same and m.warning("rescore") is None
    assert m.scan_rules_hash == json.loads((sample_xml_scan.out / "manifest.json").read_text())["rules_hash"]
    assert check_scan_rules(pack_scan, [PACK]).same
    # a pack without classifier files changes no span
    control = _control_only_pack(tmp_path)
    assert check_scan_rules(sample_xml_scan.out, [control]).same
    assert classifier_hash([control]) == classifier_hash(()) != classifier_hash([PACK])


def test_other_rules_are_named(sample_xml_scan, pack_scan):
    extra = check_scan_rules(sample_xml_scan.out, [PACK])
    assert not extra.same and str(PACK) in extra.reason and "the built-in rules only" in extra.reason
    w = extra.warning("rescore")
    assert w.startswith("rescore classifies turns with other rules than the scan: ") and "\n" not in w
    missing = check_scan_rules(pack_scan, ())
    assert not missing.same and str(PACK) in missing.reason
    d = missing.as_dict()
    assert d["same"] is False and d["scan_rules_dirs"] == [str(PACK)] and d["rules_dirs"] == []


def test_changed_rule_files_since_the_scan(tmp_path):
    pack = tmp_path / "pack"
    shutil.copytree(PACK, pack)
    out = tmp_path / "out"
    scan([SAMPLE_XML_RUN], out, ScanOptions(rules_dirs=[pack]), progress=False)
    assert check_scan_rules(out, [pack]).same
    tax = pack / "taxonomy.yaml"
    tax.write_text(tax.read_text(encoding="utf-8") + "\n# edited after the scan\n", encoding="utf-8")
    m = check_scan_rules(out, [pack])
    assert not m.same and "changed since the scan" in m.reason


def test_no_manifest_no_check(tmp_path):
    assert check_scan_rules(tmp_path, ()) is None


def test_pool_says_when_rules_differ(pack_scan, tmp_path, capsys):
    scan_copy = tmp_path / "scan"
    shutil.copytree(pack_scan, scan_copy)
    same = build_sft_pool(scan_copy, tmp_path / "same", PoolOptions(rules_dirs=[PACK]), progress=False)
    assert same.rules_match["same"] is True
    assert not any("other rules" in w for w in same.warnings)
    other = build_sft_pool(scan_copy, tmp_path / "other", progress=False)
    assert other.rules_match["same"] is False
    (w,) = [w for w in other.warnings if "other rules" in w]
    assert w.startswith("build-sft-pool classifies turns with other rules than the scan") and str(PACK) in w
    # the CLI: a warning line with the summary, a field in --json
    assert main(["build-sft-pool", str(scan_copy), "-o", str(tmp_path / "cli"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "build-sft-pool classifies turns with other rules than the scan" in " ".join(err.split())
    assert main(["build-sft-pool", str(scan_copy), "-o", str(tmp_path / "cli_json"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["rules_match"]["same"] is False and d["rules_match"]["scan_rules_dirs"] == [str(PACK)]
    assert main(["build-sft-pool", str(scan_copy), "-o", str(tmp_path / "cli_same"), "--json", "--rules",
                 str(PACK)]) == 0
    assert json.loads(capsys.readouterr().out)["rules_match"]["same"] is True


@pytest.mark.slow  # a real rescore (tiny demo checkpoint) twice
def test_rescore_says_when_rules_differ(sample_xml_scan, tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from trajlab.rescore import RescoreOptions, rescore

    out = tmp_path / "out"
    shutil.copytree(sample_xml_scan.out, out)
    s = rescore(out, [DEMO_CKPT], RescoreOptions(limit=2, progress=False))
    assert s.rules_match["same"] is True and s.warnings == []
    args = ["rescore", str(out), "--ckpt", str(DEMO_CKPT), "--limit", "2", "--no-progress", "--rules", str(PACK)]
    assert main(args) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "warning: rescore classifies turns with other rules than the scan" in text
    assert main([*args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["rules_match"]["same"] is False and d["rules_match"]["rules_dirs"] == [str(PACK)]
    assert len(d["warnings"]) == 1 and "the built-in rules only" in d["warnings"][0]
