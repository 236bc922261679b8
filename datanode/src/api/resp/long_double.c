/* Redis's float increments (INCRBYFLOAT, HINCRBYFLOAT) in the C library's
 * long double: read with strtold, added, printed with "%.17Lf" and its
 * trailing zeros cut, as Redis's util.c does (string2ld, and ld2string in
 * its LD_STR_HUMAN mode), so that clients see Redis's digits. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Redis's MAX_LONG_DOUBLE_CHARS: longer text is no float. */
#define MAX_CHARS (5 * 1024)

/* Whether the len bytes at s are a float as Redis reads one; into *out. */
static int read_float(const char *s, size_t len, long double *out) {
    char buf[MAX_CHARS];
    char *end;
    long double value;
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    value = strtold(buf, &end);
    if (isspace((unsigned char)buf[0]) || end[0] != '\0' || (size_t)(end - buf) != len ||
        (errno == ERANGE &&
         (value == HUGE_VALL || value == -HUGE_VALL || fpclassify(value) == FP_ZERO)) ||
        errno == EINVAL || isnan(value))
        return 0;
    *out = value;
    return 1;
}

/* 1 if the len bytes at s are a finite float, 0 if no float, -1 if an
 * infinite one. */
int shoal_float_check(const char *s, size_t len) {
    long double value;
    if (!read_float(s, len, &value)) return 0;
    return isinf(value) ? -1 : 1;
}

/* Adds the float at b to the one at a (0 when has_a is 0) and prints the
 * sum into out: its length, or -1 when a is no float, -2 when b is none,
 * -3 when the sum is not finite, -4 when out is too small. */
long shoal_float_add(const char *a, size_t alen, int has_a, const char *b, size_t blen,
                     char *out, size_t cap) {
    long double value = 0, incr;
    int len;
    if (has_a && !read_float(a, alen, &value)) return -1;
    if (!read_float(b, blen, &incr)) return -2;
    value += incr;
    if (isnan(value) || isinf(value)) return -3;
    len = snprintf(out, cap, "%.17Lf", value);
    if (len < 0 || (size_t)len + 1 > cap) return -4;
    if (strchr(out, '.') != NULL) {
        while (out[len - 1] == '0') len--;
        if (out[len - 1] == '.') len--;
    }
    if (len == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        len = 1;
    }
    return len;
}
