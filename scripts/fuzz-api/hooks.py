"""Schemathesis hooks for Ditto's API (loaded by scripts/fuzz-api.sh via SCHEMATHESIS_HOOKS).

Bundles are a binary format of ours (docs/FORMAT.md): the generated body is sent as its raw
bytes, so the server's bundle parser sees arbitrary input as well as near-valid bundles.
"""

import schemathesis


@schemathesis.serializer("application/x-ditto-bundle")
def bundle_bytes(ctx, value):
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return str(value).encode()
