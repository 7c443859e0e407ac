"""Credentials in URLs are never stored or printed (issue 41): a recipe naming a URL with a user
name, password or query token is refused where it is read (the error shows the URL masked), and
the redactor masks all three wherever text is written."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from envbuild.recipes.schema import DataFile, GitSource, Package
from envbuild.redact import Redactor, url_credentials

SECRET = "ghp_S3cr3tT0ken"


@pytest.mark.parametrize("url,found", [
    (f"https://{SECRET}@github.com/o/r.git", "a user name or password"),
    (f"https://me:{SECRET}@pypi.example/simple", "a user name or password"),
    (f"https://hf.co/f.bin?token={SECRET}", "a token in the query"),
    (f"https://s3.example/f?X-Amz-Signature={SECRET}&X-Amz-Date=1", "a token in the query"),
])
def test_credentials_are_found_and_masked(url, found):
    assert url_credentials(url) == found
    assert SECRET not in Redactor({}).text(f"fetching {url} failed")


@pytest.mark.parametrize("url", ["ssh://git@github.com/o/r.git", "https://pypi.org/simple?keyword=x",
                                 "https://download.pytorch.org/whl/cu118"])
def test_login_names_and_plain_queries_are_no_credentials(url):
    assert url_credentials(url) is None and Redactor({}).text(url) == url


def test_a_recipe_url_with_a_credential_is_refused_and_the_error_masks_it():
    cases = [
        (DataFile, {"name": "d", "component": "c", "path": "d.bin", "sha256": None, "unverified": "t", "why": "t",
                    "url": f"https://hf.co/d.bin?token={SECRET}"}),
        (GitSource, {"name": "s", "url": f"https://{SECRET}@github.com/o/r.git", "ref": "main", "sha": "a" * 40,
                     "why": "t"}),
        (Package, {"name": "torch", "version": "2.1.0", "why": "t", "index": f"https://u:{SECRET}@idx/simple"}),
    ]
    for model, data in cases:
        with pytest.raises(ValidationError) as err:
            model.model_validate(data)
        message = err.value.errors()[0]["msg"]
        assert "never in a recipe" in message and SECRET not in message, message
