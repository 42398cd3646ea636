"""mohawk, hawkauthlib and requests-hawk sign requests that the gateway lets through."""

import json

import hawkauthlib
import mohawk
import pytest
import requests
import webob
from requests_hawk import HawkAuth

from conftest import ISSUER
from test_browserid import bundle

METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD"]
BODY = json.dumps({"id": "a", "payload": "caf\u00e9 \u2603"}).encode()
CONTENT_TYPE = "application/json; charset=utf-8"


@pytest.fixture(scope="module")
def creds(stack, issuer_keys, user_keys):
    r = stack.login(bundle(f"hawk@{ISSUER}", issuer_keys, user_keys))
    assert r.status_code == 200, r.text
    return r.json()


def body_for(method):
    return BODY if method in ("POST", "PUT") else b""


def send_mohawk(creds, method, url):
    body = body_for(method)
    content_type = CONTENT_TYPE if body else ""
    sender = mohawk.Sender({"id": creds["id"], "key": creds["key"], "algorithm": "sha256"}, url, method, content=body, content_type=content_type)
    headers = {"Authorization": sender.request_header, **({"Content-Type": content_type} if body else {})}
    return requests.request(method, url, data=body or None, headers=headers, timeout=30)


def send_hawkauthlib(creds, method, url):
    req = webob.Request.blank(url, method=method)
    body = body_for(method)
    if body:
        req.body = body
        req.content_type = CONTENT_TYPE
    hawkauthlib.sign_request(req, creds["id"], creds["key"])
    headers = {k: v for k, v in req.headers.items() if k in ("Authorization", "Content-Type")}
    return requests.request(method, url, data=body or None, headers=headers, timeout=30)


def send_requests_hawk(creds, method, url):
    # Without a body there is nothing to hash: requests-hawk insists on being told so.
    body = body_for(method)
    headers = {"Content-Type": CONTENT_TYPE} if body else {}
    return requests.request(method, url, data=body or None, headers=headers, auth=HawkAuth(id=creds["id"], key=creds["key"], always_hash_content=bool(body)), timeout=30)


CLIENTS = {"mohawk": send_mohawk, "hawkauthlib": send_hawkauthlib, "requests-hawk": send_requests_hawk}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_signed_request_passes_the_gateway(creds, client, method):
    url = f"{creds['api_endpoint']}/storage/col?full=1&x=%20y"
    r = CLIENTS[client](creds, method, url)
    assert r.status_code == 200, r.text
    if method == "HEAD":
        assert r.content == b""
        return
    echo = r.json()
    assert (echo["uid"], echo["method"], echo["path"]) == (str(creds["uid"]), method, f"/1.5/{creds['uid']}/storage/col")
    assert echo["query"] == {"full": "1", "x": " y"}
    assert echo["bodyBytes"] == len(body_for(method))


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_wrong_key_is_refused(creds, client):
    wrong = {**creds, "key": creds["key"][:-2] + ("A=" if creds["key"][-2] != "A" else "B=")}
    r = CLIENTS[client](wrong, "POST", f"{creds['api_endpoint']}/storage/col")
    assert (r.status_code, r.json()["status"]) == (401, "invalid-credentials")


def test_a_body_changed_after_mohawk_signed_its_hash_is_refused(creds):
    url = f"{creds['api_endpoint']}/storage/col"
    sender = mohawk.Sender({"id": creds["id"], "key": creds["key"], "algorithm": "sha256"}, url, "PUT", content=BODY, content_type=CONTENT_TYPE)
    r = requests.put(url, data=BODY + b" ", headers={"Authorization": sender.request_header, "Content-Type": CONTENT_TYPE}, timeout=30)
    assert (r.status_code, r.json()["status"]) == (401, "invalid-credentials")
