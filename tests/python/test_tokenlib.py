"""tokenlib (Mozilla's reference token library) against login's tokens and the gateway.

Login's tokens come from PyBrowserID bundles and from OAuth access tokens made
with PyJWT (Bearer + X-KeyID, DESIGN §9.1), as FxA's own Python code makes them.
Both TOKEN_SECRETS modes: `derived` (each node's secret) and `master` (the
master secret itself, as Mozilla's Rust tokenserver signs).
"""

import base64
import hashlib
import hmac
import secrets
import time

import jwt as pyjwt
import mohawk
import pytest
import requests
import tokenlib
from tokenlib.errors import InvalidSignatureError

from conftest import ISSUER, OAuthKey
from test_browserid import bundle

OLDSYNC_SCOPE = "https://identity.mozilla.com/apps/oldsync"
# keys_changed_at and the generation, in ms, as FxA sends them.
KEYS_CHANGED_AT = 1_500_000_000_000


@pytest.fixture(scope="module")
def login_token(stack, issuer_keys, user_keys):
    r = stack.login(bundle(f"tokenlib@{ISSUER}", issuer_keys, user_keys))
    assert r.status_code == 200, r.text
    return r.json()


def metrics_hash(stack, message):
    """Mozilla's metrics hash: the first 32 hex characters of HMAC-SHA256 under METRICS_HASH_SECRET."""
    return hmac.new(stack.metrics_hash_secret.encode(), message.encode(), hashlib.sha256).hexdigest()[:32]


def assert_metrics_fields(stack, payload, body):
    """hashed_fxa_uid and hashed_device_id as Mozilla's Rust tokenserver puts them in the token; no tokenserver_origin."""
    assert body["hashed_fxa_uid"] == metrics_hash(stack, payload["fxa_uid"])
    assert payload["hashed_fxa_uid"] == body["hashed_fxa_uid"]
    assert payload["hashed_device_id"] == metrics_hash(stack, body["hashed_fxa_uid"] + "none")
    assert "tokenserver_origin" not in payload


def hawk_get(url, token_id, key):
    sender = mohawk.Sender({"id": token_id, "key": key, "algorithm": "sha256"}, url, "GET", always_hash_content=False)
    return requests.get(url, headers={"Authorization": sender.request_header}, timeout=30)


def test_tokenlib_parses_logins_token_and_derives_its_key(stack, login_token):
    manager = tokenlib.TokenManager(secret=stack.node_secret())
    payload = manager.parse_token(login_token["id"])
    assert payload["uid"] == login_token["uid"]
    assert payload["node"] == stack.gateway_url
    assert 0 < payload["expires"] - time.time() <= login_token["duration"]
    assert manager.get_derived_secret(login_token["id"]) == login_token["key"]


def test_tokenlib_refuses_logins_token_under_another_secret(stack, login_token):
    with pytest.raises(InvalidSignatureError):
        tokenlib.parse_token(login_token["id"], secret=stack.node_secret("http://another-node.test"))


def test_tokenlib_made_token_is_accepted_at_the_gateway(stack):
    secret = stack.node_secret()
    token = tokenlib.make_token({"uid": 4242, "node": stack.gateway_url}, secret=secret)
    key = tokenlib.get_derived_secret(token, secret=secret)
    r = hawk_get(f"{stack.gateway_url}/1.5/4242/storage/meta", token, key)
    assert r.status_code == 200, r.text
    assert r.json()["uid"] == "4242"


def test_gateway_refuses_tokenlib_tokens_it_did_not_issue_or_for_another_uid(stack):
    url = f"{stack.gateway_url}/1.5/4243/storage/meta"
    forged = tokenlib.make_token({"uid": 4243, "node": stack.gateway_url}, secret="f" * 64)
    r = hawk_get(url, forged, tokenlib.get_derived_secret(forged, secret="f" * 64))
    assert (r.status_code, r.json()["status"]) == (401, "invalid-credentials")
    secret = stack.node_secret()
    other_uid = tokenlib.make_token({"uid": 4244, "node": stack.gateway_url}, secret=secret)
    r = hawk_get(url, other_uid, tokenlib.get_derived_secret(other_uid, secret=secret))
    assert (r.status_code, r.json()["status"]) == (401, "invalid-credentials")
    expired = tokenlib.make_token({"uid": 4243, "node": stack.gateway_url, "expires": time.time() - 10}, secret=secret)
    r = hawk_get(url, expired, tokenlib.get_derived_secret(expired, secret=secret))
    assert (r.status_code, r.json()["status"]) == (401, "invalid-timestamp")


def access_token(oauth_key, sub, signing_key=None, **claims):
    """An RS256 access token with `typ: at+jwt`, signed by the OAuth key (or `signing_key`) under its kid."""
    now = int(time.time())
    payload = {"sub": sub, "scope": f"profile {OLDSYNC_SCOPE}", "iat": now, "exp": now + 300, **claims}
    headers = {"kid": oauth_key.kid, "typ": "at+jwt"}
    return pyjwt.encode(payload, signing_key or oauth_key.private_key, algorithm="RS256", headers=headers)


def b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def key_id(keys_changed_at, client_state_hex):
    """`X-KeyID: <keys_changed_at>-<base64url of the client state's bytes>`."""
    return f"{keys_changed_at}-{b64url(bytes.fromhex(client_state_hex))}"


def bearer_login(stack, token, **headers):
    return stack.login(token, scheme="Bearer", **headers)


def test_bearer_token_with_key_id_logs_in(stack, oauth_key):
    sub = secrets.token_hex(16)
    client_state = secrets.token_hex(16)
    token = access_token(oauth_key, sub, **{"fxa-generation": KEYS_CHANGED_AT})
    r = bearer_login(stack, token, **{"X-KeyID": key_id(KEYS_CHANGED_AT, client_state)})
    assert r.status_code == 200, r.text
    body = r.json()

    manager = tokenlib.TokenManager(secret=stack.node_secret())
    payload = manager.parse_token(body["id"])
    assert payload["uid"] == body["uid"]
    assert payload["node"] == stack.gateway_url
    assert payload["fxa_uid"] == sub
    assert payload["fxa_kid"] == f"{KEYS_CHANGED_AT:013d}-{b64url(bytes.fromhex(client_state))}"
    assert manager.get_derived_secret(body["id"]) == body["key"]
    assert body["hashed_fxa_uid"] == metrics_hash(stack, sub)
    assert_metrics_fields(stack, payload, body)

    # The same account again: the same uid. And the token opens the node through the gateway.
    again = bearer_login(stack, access_token(oauth_key, sub), **{"X-KeyID": key_id(KEYS_CHANGED_AT, client_state)})
    assert (again.status_code, again.json()["uid"]) == (200, body["uid"]), again.text
    r = hawk_get(f"{body['api_endpoint']}/storage/meta", body["id"], body["key"])
    assert r.status_code == 200, r.text
    assert r.json()["uid"] == str(body["uid"])


def assert_refused(r, status_string):
    assert (r.status_code, r.json()["status"]) == (401, status_string), r.text
    assert "Bearer" in r.headers.get("WWW-Authenticate", ""), r.headers


def test_bearer_refuses_a_token_signed_by_another_key(stack, oauth_key):
    # Same kid, another key: what a forger who read the JWKS would send.
    forger = OAuthKey(oauth_key.kid)
    token = access_token(oauth_key, secrets.token_hex(16), signing_key=forger.private_key)
    assert_refused(bearer_login(stack, token, **{"X-KeyID": key_id(KEYS_CHANGED_AT, "aa")}), "invalid-credentials")


def test_bearer_refuses_an_expired_token(stack, oauth_key):
    now = int(time.time())
    token = access_token(oauth_key, secrets.token_hex(16), iat=now - 7200, exp=now - 3600)
    assert_refused(bearer_login(stack, token, **{"X-KeyID": key_id(KEYS_CHANGED_AT, "aa")}), "invalid-timestamp")


def test_bearer_refuses_a_token_without_x_key_id(stack, oauth_key):
    assert_refused(bearer_login(stack, access_token(oauth_key, secrets.token_hex(16))), "invalid-key-id")


# ---- TOKEN_SECRETS=master ----


@pytest.fixture(scope="module")
def master_login_token(master_stack, issuer_keys, user_keys):
    r = master_stack.login(bundle(f"tokenlib-master@{ISSUER}", issuer_keys, user_keys))
    assert r.status_code == 200, r.text
    return r.json()


def test_master_mode_tokenlib_parses_logins_token_with_the_master_secret(master_stack, master_login_token):
    manager = tokenlib.TokenManager(secret=master_stack.master_secret)
    payload = manager.parse_token(master_login_token["id"])
    assert payload["uid"] == master_login_token["uid"]
    assert payload["node"] == master_stack.gateway_url
    assert manager.get_derived_secret(master_login_token["id"]) == master_login_token["key"]
    assert_metrics_fields(master_stack, payload, master_login_token)
    with pytest.raises(InvalidSignatureError):
        tokenlib.parse_token(master_login_token["id"], secret=master_stack.node_secret())


def test_master_mode_logins_token_opens_the_gateway(master_stack, master_login_token):
    r = hawk_get(f"{master_login_token['api_endpoint']}/storage/meta", master_login_token["id"], master_login_token["key"])
    assert r.status_code == 200, r.text
    assert r.json()["uid"] == str(master_login_token["uid"])


@pytest.mark.parametrize("mode", ["derived", "master"])
def test_gateway_accepts_tokenlib_tokens_under_its_mode_only(mode, stack, master_stack):
    s = {"derived": stack, "master": master_stack}[mode]
    other = s.node_secret() if mode == "master" else s.master_secret
    url = f"{s.gateway_url}/1.5/4250/storage/meta"
    for secret, status in ((s.signing_secret(), 200), (other, 401)):
        token = tokenlib.make_token({"uid": 4250, "node": s.gateway_url}, secret=secret)
        r = hawk_get(url, token, tokenlib.get_derived_secret(token, secret=secret))
        assert r.status_code == status, (mode, r.text)
