"""Credentials for the tests that paste secrets: each has the shape the redactor (and detect-secrets) knows, and
each says at a glance that it is fake ("FAKE", "kith tests", AWS's own documented example key). The one home
of such values: a test that needs a token takes it from here."""

from __future__ import annotations

FAKE_TOKENS = {
    "openai": "sk-proj-FAKE-kith-tests-not-a-real-key-000",
    "openai-legacy": "sk-FAKEkithtestsNotARealKey000",
    "anthropic": "sk-ant-api03-FAKE_kith_tests_not_a_real_key",
    "slack-bot": "xoxb-0000000000-0000000000-fakekithtestsnotreal",
    "slack-user": "xoxp-0000-0000-fakekithtestsnotreal",
    "telegram": "123456789:FAKE_kith_tests_not_a_real_bot_token",
    "github": "ghp_FAKEkithTestsNotARealToken0000000000",
    "github-fine-grained": "github_pat_FAKE_kith_tests_not_a_real_token",
    "aws": "AKIAIOSFODNN7EXAMPLE",  # AWS's own example access key id, from its documentation
    # {"alg":"HS256"} . {"sub":"FAKE"} . "FAKE-signature"
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJGQUtFIn0.RkFLRS1zaWduYXR1cmU",
    "google": "AIzaFAKE_kith_tests_not_a_real_key_00",
}
# Formats only detect-secrets knows, at the exact lengths its patterns want.
DETECT_SECRETS_TOKENS = {
    "gitlab": "glpat-FAKE-kith-tests-0000",
    "stripe": "sk_live_FAKEkithTests00000000000",
    "sendgrid": "SG.FAKE_kith_tests_000000.FAKE_kith_tests_not_a_real_sendgrid_key_000",
}
