"""Reading the configuration reads each file once per process (docs/architecture.md, "Root
resolution and configuration"): a full-path ``retrieve``, run as a real CLI process against a
real embedding service, parses and checks rightmemory.toml and rmtui.toml once each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from rmtui.engine.memory.config import CONFIG_FILE, LOCAL_FILE, set_config_value
from tests.retrieve_kit import TOKEN, write_small_root

# The real CLI entry point, with the config module's parse and check counted per file (the
# real functions still do the work); the counts go to stderr as the process ends.
DRIVER = """
import collections, json, sys
import rmtui.engine.memory.config as config
counts = collections.Counter()
real_parse, real_check = config.parse_toml, config.validate_doc
def parse(text, label):
    counts["parse " + label] += 1
    return real_parse(text, label)
def check(doc, file, label, **kw):
    counts["check " + file] += 1
    return real_check(doc, file, label, **kw)
config.parse_toml, config.validate_doc = parse, check
from rmtui.cli import main
code = main(sys.argv[1:])
sys.stderr.write("\\nCOUNTS " + json.dumps(counts) + "\\n")
sys.exit(code)
"""


def test_a_full_path_retrieve_parses_each_config_file_once(root, service):
    write_small_root(root)
    set_config_value(root.path, "embedding.service_url", service.url)
    set_config_value(root.path, "embedding.service_token_env", "RMTUI_TEST_TOKEN")
    env = {**os.environ, "RMTUI_TEST_TOKEN": TOKEN, "RMTUI_THIN_CLIENT": "0"}
    proc = subprocess.run([sys.executable, "-c", DRIVER, "--headless", "retrieve", "--json", "--root",
                           str(root.path), "--session", "s1", "who looks after the billing database?"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"]  # a real answer, by the full path
    counts = json.loads(proc.stderr.rsplit("COUNTS ", 1)[1])
    assert counts == {f"parse {root.path / CONFIG_FILE}": 1, f"parse {root.path / LOCAL_FILE}": 1,
                      f"check {CONFIG_FILE}": 1, f"check {LOCAL_FILE}": 1}, counts
