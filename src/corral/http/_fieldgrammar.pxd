# cython: language_level=3
"""The grammar of field values the compiled request parser checks (`corral.http._parser`):
names compared without case, list elements (RFC 9110 5.6.1), the Host field (RFC 9112 3.2).
Inline functions, compiled into the module that cimports them; the Python parser's twins of
these checks are its regular expressions and `bytes.lower` (corral/http/parser.py)."""


cdef inline unsigned char lower(unsigned char c):
    return c + 32 if 65 <= c <= 90 else c


cdef inline bint same_lowered(
    const unsigned char* p, Py_ssize_t n, const char* lowered, Py_ssize_t size
):
    """The bytes at ``p`` are ``lowered`` but for the case of letters."""
    cdef Py_ssize_t i
    if n != size:
        return False
    for i in range(n):
        if lower(p[i]) != <unsigned char>lowered[i]:
            return False
    return True


cdef inline bint element_is(
    const unsigned char* p, Py_ssize_t start, Py_ssize_t stop, const char* lowered, Py_ssize_t size
):
    """The list element ``p[start:stop]``, without the whitespace around it, is ``lowered``."""
    while start < stop and (p[start] == 32 or p[start] == 9):
        start += 1
    while stop > start and (p[stop - 1] == 32 or p[stop - 1] == 9):
        stop -= 1
    return same_lowered(p + start, stop - start, lowered, size)


cdef extern from *:
    """
    /* RFC 3986 2.2 and 2.3: unreserved and sub-delims, a reg-name's characters */
    static const unsigned char corral_reg_name[256] = {
        ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
        ['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1,
        ['!'] = 1, ['$'] = 1, ['&' ... ','] = 1, [';'] = 1, ['='] = 1,
    };
    """
    const unsigned char* _REG_NAME "corral_reg_name"


cdef inline bint _hex_digit(unsigned char c):
    return 48 <= c <= 57 or 65 <= c <= 70 or 97 <= c <= 102


cdef inline bint valid_host(const unsigned char* p, Py_ssize_t n):
    """RFC 9112 3.2: ``uri-host [ ":" port ]``, the host a name (unreserved, sub-delims and
    pct-encoded characters: an IPv4 address is one too) or an IP literal in brackets; empty for
    a target without an authority. (Run for every request: one table lookup per byte.)"""
    cdef Py_ssize_t i = 0
    if n and p[0] == 91:  # "[": IPv6 or IPvFuture, a zone's "%25" included
        i = 1
        while i < n and (_REG_NAME[p[i]] or p[i] == 58 or p[i] == 37):
            i += 1
        if i == 1 or i == n or p[i] != 93:
            return False
        i += 1
    else:
        while True:
            while i < n and _REG_NAME[p[i]]:
                i += 1
            if i == n or p[i] != 37:
                break
            if i + 2 >= n or not (_hex_digit(p[i + 1]) and _hex_digit(p[i + 2])):
                return False  # "%" not followed by two hex digits
            i += 3
    if i < n:  # ":" port
        if p[i] != 58:
            return False
        i += 1
        while i < n and 48 <= p[i] <= 57:
            i += 1
    return i == n
