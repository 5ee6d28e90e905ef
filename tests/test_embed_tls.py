"""An ``https://`` embedding service: retrieval trusts a self-signed certificate only when
the user configured that trust (``SSL_CERT_FILE``), and says so clearly when not."""

from __future__ import annotations

import ssl
import subprocess

import pytest

from rmtui.engine.memory.config import set_config_value
from tests.retrieve_kit import TOKEN, ServerThread, write_small_root


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@pytest.fixture
def tls_service(plain_backend, certificate):
    cert, key = certificate
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv = ServerThread(plain_backend, TOKEN, ssl_context=ctx)
    yield srv.url
    srv.stop()


@pytest.fixture
def tls_root(root, tls_service):
    write_small_root(root)
    set_config_value(root.path, "embedding.service_url", tls_service)
    set_config_value(root.path, "embedding.service_token_env", "RMTUI_TEST_TOKEN")
    set_config_value(root.path, "embedding.fallback_lexical", False)
    return root


def test_retrieve_through_https_service_with_configured_trust(cli, tls_root, certificate):
    env = {"RMTUI_TEST_TOKEN": TOKEN, "SSL_CERT_FILE": str(certificate[0])}
    r = cli("--headless", "retrieve", "--json", "--root", str(tls_root.path), "--session", "tls",
            "--top", "1", "who looks after the billing database?", env=env)
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["mode"] == "hybrid" and out["dense_coverage"] == 1.0
    assert out["results"][0]["id"] == "bob-role"


def test_untrusted_certificate_is_a_clear_error(cli, tls_root):
    r = cli("--headless", "retrieve", "--json", "--root", str(tls_root.path), "--session", "tls2",
            "billing database", env={"RMTUI_TEST_TOKEN": TOKEN})
    assert r.code == 4, (r.stdout, r.stderr)
    assert "untrusted certificate" in r.stderr
