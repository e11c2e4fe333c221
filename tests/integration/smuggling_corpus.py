"""The request-smuggling corpus that test_proxy_smuggling.sh sends to `stagger proxy`.

Each vector is raw bytes a hostile client writes on a fresh connection, with
{M} replaced by a marker unique to the vector (it is in the request-target,
so the upstream's raw log shows whether anything of it was forwarded).

  REFUSE  the proxy must answer 4xx (or 501), close the connection, forward
          nothing (the marker never reaches the upstream), and log one
          "proxy" line with `reason` (head_check.c's reason token). Every
          one of these was forwarded, or not answered at all, by the proxy
          before the fix (checked against the old build).
  GUARD   refused already before the fix (by libmicrohttpd itself, or by
          the target check) but not logged: kept as regression guards
          (same assertions; the log reason of MHD's own refusal, before
          our handler, is "malformed-request").
  ACCEPT  well-formed, if unusual, framing (RFC 9112 allows it): it must be
          answered 200 and reach the upstream as exactly one request,
          reframed by libcurl (Content-Length, no Transfer-Encoding), so a
          request hidden in its body is never parsed upstream.

Sources:
  [RFC9112]   RFC 9112, HTTP/1.1: §2.2 (bare CR), §3.2 (Host), §5.1 and
              §5.2 (no whitespace before the colon, obs-fold), §6.1 (TE in
              HTTP/1.0), §6.3 (message body length: CL with TE, differing
              CLs, chunked not final) and §11.2 (request smuggling).
  [RFC9110]   RFC 9110, HTTP Semantics: §5.1 (field name is a token), §5.5
              (CR, LF, NUL in values), §8.6 (Content-Length = 1*DIGIT).
  [WATCHFIRE] C. Linhart, A. Klein, R. Heled, S. Orrin, "HTTP Request
              Smuggling", Watchfire, 2005 (two Content-Length fields).
  [KETTLE]    J. Kettle, "HTTP Desync Attacks: Request Smuggling Reborn",
              PortSwigger Research, 2019 (CL.TE, TE.CL, TE.TE).
  [ACADEMY]   PortSwigger Web Security Academy, "HTTP request smuggling",
              "TE.TE behavior: obfuscating the TE header" (xchunked, space
              before the colon, tab, leading space, bare LF, duplicate TE).
  [ISSUE30]   stagger issue #30 (obs-fold glued onto the name; 0x01/0xFF in
              names; the victim reproduction).
"""

# The request hidden in a body: what the upstream would run next.
SMUGGLED = b"GET /admin/delete-everything HTTP/1.1\r\nX-Ignore: x"


def post(head, body=b"", version=b"HTTP/1.1", host=True):
    """A POST to /smuggle/{M} with the given extra header lines and body."""
    h = b"POST /smuggle/{M} " + version + b"\r\n"
    if host:
        h += b"Host: proxy.test\r\n"
    return h + head + b"\r\n" + body


def cl(body):
    return b"Content-Length: %d\r\n" % len(body)


CHUNKED_HIDING = b"0\r\n\r\n" + SMUGGLED  # CL.TE: a chunked reader stops early
TECL_BODY = b"%x\r\n%s\r\n0\r\n\r\n" % (len(SMUGGLED), SMUGGLED)  # TE.CL

VECTORS = [
    # name, kind, expected status, log reason, source, bytes
    ("cl-te-space-before-colon", "REFUSE", 400, "bad-field-name", "[KETTLE] [ACADEMY] [ISSUE30]",
     post(cl(CHUNKED_HIDING) + b"Transfer-Encoding : chunked\r\n", CHUNKED_HIDING)),
    ("cl-te-plain", "REFUSE", 400, "cl-and-te", "[KETTLE] [RFC9112] 6.3",
     post(cl(CHUNKED_HIDING) + b"Transfer-Encoding: chunked\r\n", CHUNKED_HIDING)),
    ("te-cl-plain", "REFUSE", 400, "cl-and-te", "[KETTLE] [RFC9112] 6.3",
     post(b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", TECL_BODY)),
    ("te-xchunked", "REFUSE", 400, "cl-and-te", "[ACADEMY]",
     post(cl(CHUNKED_HIDING) + b"Transfer-Encoding: xchunked\r\n", CHUNKED_HIDING)),
    ("te-xchunked-alone", "REFUSE", 400, "te-not-chunked", "[ACADEMY] [RFC9112] 6.3",
     post(b"Transfer-Encoding: xchunked\r\n", TECL_BODY)),
    ("te-space-chunked-with-cl", "REFUSE", 400, "cl-and-te", "[ACADEMY] [RFC9112] 6.3",
     post(cl(CHUNKED_HIDING) + b"Transfer-Encoding:  chunked\r\n", CHUNKED_HIDING)),
    ("te-chunked-identity", "REFUSE", 400, "te-not-chunked", "[RFC9112] 6.3",
     post(b"Transfer-Encoding: chunked, identity\r\n", TECL_BODY)),
    ("te-gzip-chunked", "REFUSE", 501, "te-unsupported", "[RFC9112] 6.1",
     post(b"Transfer-Encoding: gzip, chunked\r\n", TECL_BODY)),
    ("te-tab-before-colon", "REFUSE", 400, "bad-field-name", "[ACADEMY] [ISSUE30]",
     post(cl(CHUNKED_HIDING) + b"Transfer-Encoding\t: chunked\r\n", CHUNKED_HIDING)),
    ("te-duplicate", "REFUSE", 400, "te-not-chunked", "[ACADEMY]",
     post(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n", TECL_BODY)),
    ("te-leading-space-line", "REFUSE", 400, "bad-field-name", "[ACADEMY] [RFC9112] 5.2",
     post(b" Transfer-Encoding: chunked\r\n" + cl(CHUNKED_HIDING), CHUNKED_HIDING)),
    ("obs-fold-te", "REFUSE", 400, "bad-field-name", "[RFC9112] 5.2 [ISSUE30]",
     post(cl(CHUNKED_HIDING) + b"X-Fold: a\r\n\tTransfer-Encoding: chunked\r\n", CHUNKED_HIDING)),
    ("name-0x01", "REFUSE", 400, "bad-field-name", "[RFC9110] 5.1 [ISSUE30]",
     post(b"X-A\x01: b\r\n")),
    ("name-0xff-te", "REFUSE", 400, "bad-field-name", "[RFC9110] 5.1 [ISSUE30]",
     post(cl(CHUNKED_HIDING) + b"Transfer-Encoding\xff: chunked\r\n", CHUNKED_HIDING)),
    ("nul-before-chunked", "REFUSE", 400, "bad-transfer-encoding", "[RFC9110] 5.5",
     post(b"Transfer-Encoding: \x00chunked\r\n", TECL_BODY)),
    ("bare-cr-value", "REFUSE", 400, "bad-field-value", "[RFC9112] 2.2",
     post(cl(CHUNKED_HIDING) + b"X-A: a\rTransfer-Encoding: chunked\r\n", CHUNKED_HIDING)),
    ("two-hosts", "REFUSE", 400, "several-hosts", "[RFC9112] 3.2",
     post(b"Host: other.test\r\n")),
    ("no-host", "REFUSE", 400, "no-host", "[RFC9112] 3.2", post(b"", host=False)),
    ("two-cls-differ", "REFUSE", 400, "several-content-lengths", "[WATCHFIRE] [RFC9112] 6.3",
     post(b"Content-Length: 5\r\nContent-Length: %d\r\n" % len(CHUNKED_HIDING), CHUNKED_HIDING)),
    ("cl-with-sign", "REFUSE", 400, "bad-content-length", "[RFC9110] 8.6",
     post(b"Content-Length: 5\r\nContent-Length: +5\r\n", b"abcde")),
    ("te-in-http10", "REFUSE", 400, "te-in-http10", "[RFC9112] 6.1",
     post(b"Transfer-Encoding: chunked\r\n", TECL_BODY, version=b"HTTP/1.0")),
    ("method-not-token", "REFUSE", 400, "bad-method", "[RFC9110] 5.6.2 (method = token)",
     b"G(T /smuggle/{M} HTTP/1.1\r\nHost: proxy.test\r\n\r\n"),
    ("method-too-long", "REFUSE", 501, "method-too-long", "[RFC9112] 3",
     b"A" * 5000 + b" /smuggle/{M} HTTP/1.1\r\nHost: proxy.test\r\n\r\n"),
    # Refused already before the fix (but not logged): by libmicrohttpd 0.9.75
    # before our handler, or (the targets) by libcurl's URL parser there.
    ("space-in-target", "GUARD", 400, "bad-target", "[RFC9112] 3.2 (request-target has no SP)",
     b"GET /smuggle/{M} HTTP/1.1 HTTP/1.1\r\nHost: proxy.test\r\n\r\n"),
    ("bare-cr-in-target", "GUARD", 400, "bad-target", "[RFC9112] 2.2",
     b"GET /smuggle/{M}\rX HTTP/1.1\r\nHost: proxy.test\r\n\r\n"),
    ("te-newline-colon", "GUARD", 400, "malformed-request", "[ACADEMY]",
     post(b"Transfer-Encoding\n: chunked\r\n" + cl(CHUNKED_HIDING), CHUNKED_HIDING)),
    ("cl-sign-alone", "GUARD", 400, "malformed-request", "[RFC9110] 8.6",
     post(b"Content-Length: +5\r\n", b"abcde")),
    ("nul-in-name", "GUARD", 400, "malformed-request", "[RFC9110] 5.1",
     post(b"Transfer\x00-Encoding: chunked\r\n" + cl(CHUNKED_HIDING), CHUNKED_HIDING)),
    # Well-formed framing, reframed by libcurl: exactly one request upstream.
    ("te-tab-value", "ACCEPT", 200, None, "[ACADEMY] (OWS after the colon is valid)",
     post(b"Transfer-Encoding:\tchunked\r\n", TECL_BODY)),
    ("bare-lf-line-end", "ACCEPT", 200, None, "[ACADEMY] [RFC9112] 2.2 (bare LF may end a line)",
     post(b"X: X\nTransfer-Encoding: chunked\r\n", TECL_BODY)),
    # The gap head_check.c documents: MHD cuts a value at a NUL before we
    # see it; nothing after the NUL (and no NUL) reaches the upstream.
    ("nul-in-value", "ACCEPT", 200, None, "[RFC9110] 5.5 (the documented gap)",
     post(b"X-A: a\x00Transfer-Encoding: chunked\r\n" + cl(CHUNKED_HIDING), CHUNKED_HIDING)),
]
