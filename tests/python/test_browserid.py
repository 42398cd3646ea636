"""PyBrowserID's bundles through login, checked against PyBrowserID's own verifier."""

import secrets
import time

import pytest
from browserid import jwt
from browserid.supportdoc import SupportDocumentManager
from browserid.tests.support import get_keypair, make_assertion
from browserid.utils import bundle_certs_and_assertion, decode_bytes, decode_json_bytes, to_hex
from browserid.verifiers.local import LocalVerifier

from conftest import AUDIENCE, ISSUER, _prime, _probably_prime, rsa_keypair

TOKEN_FIELDS = {"id", "key", "uid", "api_endpoint", "duration", "hashalg"}


def local_verifier(issuer_keys):
    """PyBrowserID's LocalVerifier, with our test IdP's key as its support document."""
    public = issuer_keys[0]

    class Docs(SupportDocumentManager):
        def fetch_support_document(self, hostname):
            return {"public-key": public}

    return LocalVerifier(audiences=[AUDIENCE], supportdocs=Docs())


def bundle(email, issuer_keys, user_keys, **kwds):
    public, private = user_keys[:2]
    issuer_public, issuer_private = issuer_keys[:2]
    return make_assertion(email, AUDIENCE, issuer=ISSUER, email_keypair=(public, private), issuer_keypair=(issuer_public, issuer_private), **kwds)


@pytest.mark.parametrize("scheme", ["BrowserID", "Assertion"])
def test_rs256_bundle_logs_in(stack, issuer_keys, user_keys, scheme):
    b = bundle(f"alice-{scheme.lower()}@{ISSUER}", issuer_keys, user_keys)
    assert local_verifier(issuer_keys).verify(b)["email"] == f"alice-{scheme.lower()}@{ISSUER}"
    r = stack.login(b, scheme)
    assert r.status_code == 200, r.text
    body = r.json()
    assert TOKEN_FIELDS <= set(body)
    assert body["api_endpoint"] == f"{stack.gateway_url}/1.5/{body['uid']}"
    assert body["hashalg"] == "sha256"


def test_refusals_are_401_with_status_strings(stack, issuer_keys, user_keys):
    rogue = rsa_keypair()
    email = f"mallory@{ISSUER}"
    cases = {
        "untrusted issuer key": bundle(email, rogue, user_keys),
        "wrong audience": make_assertion(email, "https://elsewhere.test", issuer=ISSUER, email_keypair=user_keys[:2], issuer_keypair=issuer_keys[:2]),
        "bad assertion signature": bundle(email, issuer_keys, user_keys, assertion_sig=b"\x01" * 256),
    }
    for what, b in cases.items():
        r = stack.login(b)
        assert (r.status_code, r.json()["status"]) == (401, "invalid-credentials"), what
    expired = bundle(email, issuer_keys, user_keys, exp=int((time.time() - 3600) * 1000))
    r = stack.login(expired)
    assert (r.status_code, r.json()["status"]) == (401, "invalid-timestamp")


def signature_bytes(compact_jws):
    return len(decode_bytes(compact_jws.split(".")[2]))


def test_many_bundles_including_short_signatures(stack, issuer_keys, user_keys):
    """PyBrowserID writes RS256 signatures as plain integers, so about 1 in 256 is a byte short.

    Certificates and assertions are signed until at least one of each is short
    (every certificate certifies the same user key, so any certificate goes with
    any assertion); every bundle must log in, and PyBrowserID's own verifier
    accepts each too.
    """
    user_public, user_private, _ = user_keys
    _, issuer_private, _ = issuer_keys
    exp = int((time.time() + 300) * 1000)
    certificates, assertions = [], []
    for kind in ("certificate", "assertion"):
        made = certificates if kind == "certificate" else assertions
        for i in range(4000):
            if kind == "certificate":
                claims = {"iss": ISSUER, "exp": exp, "principal": {"email": f"many-{i % 16}@{ISSUER}"}, "public-key": user_public, "n": i}
                made.append(jwt.generate(claims, issuer_private))
            else:
                made.append(jwt.generate({"aud": AUDIENCE, "exp": exp - i}, user_private))
            if len(made) >= 100 and any(signature_bytes(j) < 256 for j in made):
                break
    short = [sum(signature_bytes(j) < 256 for j in made) for made in (certificates, assertions)]
    assert short[0] > 0 and short[1] > 0, f"no short signature in {len(certificates)} certificates / {len(assertions)} assertions"

    verifier = local_verifier(issuer_keys)
    failures = []
    for i in range(max(len(certificates), len(assertions))):
        b = bundle_certs_and_assertion([certificates[i % len(certificates)]], assertions[i % len(assertions)])
        verifier.verify(b)
        r = stack.login(b)
        if r.status_code != 200:
            failures.append((i, r.status_code, r.text))
    assert failures == [], f"{len(failures)} refused, e.g. {failures[:3]}"
    print(f"{max(len(certificates), len(assertions))} bundles, short signatures: {short[0]} certificates, {short[1]} assertions")


def ds256_keypair():
    """A DS256 key (2048-bit p, 256-bit q, probable primes) for PyBrowserID, which ships DS128 parameters only."""
    q = _prime(256)
    while True:
        p = secrets.randbits(2048) | (1 << 2047)
        p -= p % (2 * q) - 1  # p = 1 (mod 2q)
        if p.bit_length() == 2048 and _probably_prime(p):
            break
    h = 2
    while (g := pow(h, (p - 1) // q, p)) == 1:
        h += 1
    x = secrets.randbelow(q - 1) + 1
    public = {"algorithm": "DS", "p": to_hex(p), "q": to_hex(q), "g": to_hex(g), "y": to_hex(pow(g, x, p))}
    return public, jwt.DS256Key({**public, "x": to_hex(x)})


@pytest.fixture(scope="module")
def dsa_user_keys():
    """DS128: PyBrowserID's own key generation (its fixed 1024/160 parameters); DS256: ds256_keypair."""
    return {"DS128": get_keypair(f"dsa-user.{ISSUER}"), "DS256": ds256_keypair()}


def alg_of(compact_jws):
    return decode_json_bytes(compact_jws.split(".")[0])["alg"]


@pytest.mark.parametrize("algorithm", ["DS128", "DS256"])
def test_dsa_user_keys(stack, issuer_keys, dsa_user_keys, algorithm):
    email = f"dsa-{algorithm.lower()}@{ISSUER}"
    b = bundle(email, issuer_keys, dsa_user_keys[algorithm])
    assert alg_of(b.split("~")[1]) == algorithm
    assert local_verifier(issuer_keys).verify(b)["email"] == email
    r = stack.login(b)
    assert r.status_code == 200, r.text
    assert TOKEN_FIELDS <= set(r.json())
    # The same key with a signature for another message is refused.
    other = bundle(email, issuer_keys, dsa_user_keys[algorithm], exp=int((time.time() + 30) * 1000))
    forged = b.rsplit(".", 1)[0] + "." + other.rsplit(".", 1)[1]
    r = stack.login(forged)
    assert (r.status_code, r.json()["status"]) == (401, "invalid-credentials")


@pytest.mark.parametrize("user", ["RS", "DS128"])
def test_old_style_bundle(stack, issuer_keys, user_keys, dsa_user_keys, user):
    keys = user_keys if user == "RS" else dsa_user_keys[user]
    b = bundle(f"old-{user.lower()}@{ISSUER}", issuer_keys, keys, new_style=False)
    assert "~" not in b
    local_verifier(issuer_keys).verify(b)
    r = stack.login(b)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("form", ["RS", "DS"])
def test_support_document_issuer_keys(stack, doc_issuer_keys, user_keys, dsa_user_keys, form):
    """TRUSTED_ISSUERS holds these issuer keys exactly as a support document publishes them."""
    issuer = doc_issuer_keys[form]
    for name, keys in (("rs", user_keys), ("ds256", dsa_user_keys["DS256"])):
        email = f"doc-{form.lower()}-{name}@{ISSUER}"
        b = bundle(email, issuer, keys)
        assert alg_of(b.split("~")[0]) == ("RS256" if form == "RS" else "DS128")
        assert local_verifier(issuer).verify(b)["email"] == email
        r = stack.login(b)
        assert r.status_code == 200, (name, r.text)
