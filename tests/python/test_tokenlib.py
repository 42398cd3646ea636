"""tokenlib (Mozilla's reference token library) against login's tokens and the gateway."""

import time

import mohawk
import pytest
import requests
import tokenlib
from tokenlib.errors import InvalidSignatureError

from conftest import ISSUER
from test_browserid import bundle


@pytest.fixture(scope="module")
def login_token(stack, issuer_keys, user_keys):
    r = stack.login(bundle(f"tokenlib@{ISSUER}", issuer_keys, user_keys))
    assert r.status_code == 200, r.text
    return r.json()


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


@pytest.mark.skip(reason="Bearer (OAuth access token + X-KeyID, PyJWT): issue #12 item 1, not yet implemented")
def test_bearer_token_with_key_id_logs_in(stack):
    pass
