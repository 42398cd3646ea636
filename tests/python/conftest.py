"""Outside clients against the running embedded stack (issue #12 item 6).

One `npm start` per test session, on ports the system picks, its own data
folder, fresh 64-hex-character secrets, an audience of its own and a
TRUSTED_ISSUERS file holding a test IdP's RSA key, and Bearer on: an OAUTH_JWKS
file holding an OAuth server's RSA key and a METRICS_HASH_SECRET. The tests talk
to it only over HTTP, with other people's libraries: PyBrowserID, tokenlib,
mohawk, hawkauthlib, requests-hawk and PyJWT.
"""

import base64
import json
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import jwt as pyjwt
import pytest
import requests
from browserid import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from browserid.tests.support import get_keypair
from tokenlib.utils import HKDF

REPO = Path(__file__).resolve().parents[2]
AUDIENCE = "https://python-clients.test"
# E-mails are at the issuer's own domain, so PyBrowserID's LocalVerifier trusts it as primary.
ISSUER = "pyidp.test"
APP_PATH = "/1.0/sync/1.5"
STARTUP_TIMEOUT = 90
STOP_TIMEOUT = 30


# ---- RSA keys for PyBrowserID (it has no key generator; pure Python is enough here) ----

_SMALL_PRIMES = [p for p in range(3, 2000, 2) if all(p % d for d in range(3, int(p**0.5) + 1, 2))]


def _probably_prime(n, rounds=24):
    if any(n % p == 0 for p in _SMALL_PRIMES):
        return n in _SMALL_PRIMES
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for _ in range(rounds):
        x = pow(secrets.randbelow(n - 3) + 2, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def _prime(bits):
    while True:
        candidate = secrets.randbits(bits) | (1 << (bits - 1)) | (1 << (bits - 2)) | 1
        if _probably_prime(candidate):
            return candidate


def rsa_keypair(bits=2048, e=65537):
    """(public key in BrowserID's RS form, PyBrowserID RS256 private key, (n, e))."""
    while True:
        p, q = _prime(bits // 2), _prime(bits // 2)
        n, phi = p * q, (p - 1) * (q - 1)
        if p != q and n.bit_length() == bits and phi % e:
            break
    d = pow(e, -1, phi)
    public = {"algorithm": "RS", "n": str(n), "e": str(e)}
    return public, jwt.RS256Key({**public, "d": str(d)}), (n, e)


def b64url_uint(value):
    return base64.urlsafe_b64encode(value.to_bytes((value.bit_length() + 7) // 8, "big")).rstrip(b"=").decode()


# ---- the stack ----


class Stack:
    def __init__(self, login_url, gateway_url, master_secret, metrics_hash_secret, token_secrets):
        self.login_url = login_url
        self.gateway_url = gateway_url
        self.master_secret = master_secret
        self.metrics_hash_secret = metrics_hash_secret
        self.token_secrets = token_secrets

    @property
    def token_url(self):
        return self.login_url + APP_PATH

    def node_secret(self, node_url=None):
        """The node's secret as Mozilla's tokenserver derives it (mozsvc DerivedSecrets)."""
        master = self.master_secret.encode()
        info = b"services.mozilla.com/mozsvc/v1/node_secret/" + (node_url or self.gateway_url).encode()
        return HKDF(master, salt=None, info=info, size=len(master) // 2).hex()

    def signing_secret(self):
        """What the node's tokens are signed with: its node secret, or with TOKEN_SECRETS=master the master secret."""
        return self.master_secret if self.token_secrets == "master" else self.node_secret()

    def login(self, bundle, scheme="BrowserID", **headers):
        return requests.get(self.token_url, headers={"Authorization": f"{scheme} {bundle}", **headers}, timeout=30)


def _read_lines(stream, sink):
    for line in iter(stream.readline, ""):
        sink.append(line)


@pytest.fixture(scope="session")
def issuer_keys():
    return rsa_keypair()


@pytest.fixture(scope="session")
def user_keys():
    return rsa_keypair()


class OAuthKey:
    """An OAuth server's RSA signing key (cryptography), its kid, and its public JWK (PyJWT)."""

    def __init__(self, kid):
        self.kid = kid
        self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_jwk = {**pyjwt.algorithms.RSAAlgorithm.to_jwk(self.private_key.public_key(), as_dict=True), "kid": kid, "use": "sig"}


@pytest.fixture(scope="session")
def oauth_key():
    return OAuthKey("python-oauth-1")


@pytest.fixture(scope="session")
def doc_issuer_keys():
    """(public, private) issuer keys in BrowserID's support-document forms, trusted for ISSUER as published.

    "RS": n and e in decimal; "DS": PyBrowserID's own DS128 key generation.
    """
    rs_public, rs_private, _ = rsa_keypair()
    return {"RS": (rs_public, rs_private), "DS": get_keypair(f"ds-issuer.{ISSUER}")}


@contextmanager
def running_stack(data_dir, issuer_keys, doc_issuer_keys, oauth_key, token_secrets):
    """`npm start` on free ports; stopped with SIGTERM at the end, which must end it cleanly."""
    _, _, (n, e) = issuer_keys
    trusted = data_dir / "trusted-issuers.json"
    # "domains": ["*"] is the explicit wildcard of the domain-bound issuers (DESIGN §10).
    keys = [{"kty": "RSA", "n": b64url_uint(n), "e": b64url_uint(e)}] + [public for public, _ in doc_issuer_keys.values()]
    trusted.write_text(json.dumps({ISSUER: {"keys": keys, "domains": ["*"]}}))
    jwks = data_dir / "oauth-jwks.json"
    jwks.write_text(json.dumps({"keys": [oauth_key.public_jwk]}))
    master = secrets.token_hex(32)
    metrics_hash_secret = secrets.token_hex(32)
    env = {
        **os.environ,
        "LOGIN_PORT": "0",
        "GATEWAY_PORT": "0",
        "DIRECTORY_PORT": "0",
        "NODEASSIGN_PORT": "0",
        "DEMO_APP_PORT": "0",
        "BIND_HOST": "127.0.0.1",
        "DATA_DIR": str(data_dir),
        "MASTER_SECRETS": master,
        "INTERNAL_SECRET": secrets.token_hex(32),
        "TOKEN_SECRETS": token_secrets,
        "AUDIENCES": AUDIENCE,
        "TRUSTED_ISSUERS": str(trusted),
        "OAUTH_JWKS": str(jwks),
        "METRICS_HASH_SECRET": metrics_hash_secret,
        "LOG_LEVEL": "warn",
    }
    proc = subprocess.Popen(
        ["npm", "start", "--silent"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: npm, tsx and node stop together
    )
    output = []
    reader = threading.Thread(target=_read_lines, args=(proc.stdout, output), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        login = gateway = None
        while not (login and gateway):
            text = "".join(output)
            login = re.search(r"login:\s+(http://\S+?)/1\.0/", text)
            gateway = re.search(r"node-gateway:\s+(http://\S+)", text)
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the stack did not start:\n" + text[-3000:])
            time.sleep(0.1)
        yield Stack(login.group(1), gateway.group(1), master, metrics_hash_secret, token_secrets)
    finally:
        stopped_cleanly = False
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
                stopped_cleanly = True
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        reader.join(5)
    assert stopped_cleanly and "stopped" in "".join(output), "the stack did not stop cleanly:\n" + "".join(output)[-3000:]


@pytest.fixture(scope="session")
def stack(tmp_path_factory, issuer_keys, doc_issuer_keys, oauth_key):
    """The stack as shipped: TOKEN_SECRETS=derived, each node's tokens signed with its own node secret."""
    with running_stack(tmp_path_factory.mktemp("stack-data"), issuer_keys, doc_issuer_keys, oauth_key, "derived") as s:
        yield s


@pytest.fixture(scope="session")
def master_stack(tmp_path_factory, issuer_keys, doc_issuer_keys, oauth_key):
    """TOKEN_SECRETS=master: tokens signed with the master secret itself, as Mozilla's Rust tokenserver signs."""
    with running_stack(tmp_path_factory.mktemp("master-stack-data"), issuer_keys, doc_issuer_keys, oauth_key, "master") as s:
        yield s
