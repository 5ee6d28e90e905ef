from __future__ import annotations


def test_init_validate_status_roundtrip(tmp_path, cli):
    target = tmp_path / "mem"
    r = cli("--headless", "init", str(target), "--json")
    assert r.code == 0, r.stderr
    assert (target / "MEMORY.md").is_file()
    r = cli("--headless", "validate", "--root", str(target))
    assert r.code == 0, r.stdout + r.stderr
    r = cli("--headless", "status", "--root", str(target), "--json")
    assert r.code == 0
    assert r.json()["root"] == str(target.resolve())
