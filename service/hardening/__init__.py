"""What every request meets before a route reads it, from outside in: the bounded request head
(``header_limit``), the HTTP rules (``http_rules``: methods, media types, body sizes, hosts),
strict JSON bodies (``strict_json``), the input rules of paths and queries (``input_rules``),
the security headers of every answer (``security_headers``), and errors as JSON that name the
field (``errors``)."""
