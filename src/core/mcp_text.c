/*
 * mcp_text.c - the white-space trim every text reader in mcpnet shares (see text.h).
 * Kept apart from the parsers so that they cannot drift on what a space is. Also the
 * error-buffer writer that decoders and the doctor share instead of each their own, and
 * the printable-ASCII rule for text from other hosts.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/text.h"

size_t mcp_trim_span(const char **s, size_t *n)
{
  while (*n > 0 && isspace((unsigned char)**s)) {
    (*s)++;
    (*n)--;
  }
  while (*n > 0 && isspace((unsigned char)(*s)[*n - 1]))
    (*n)--;
  return *n;
}

char *mcp_trim_inplace(char *s)
{
  const char *p = s;
  size_t n = strlen(s);

  mcp_trim_span(&p, &n);
  s[(p - s) + n] = '\0';
  return s + (p - s);
}

void mcp_text_errf(char *err, size_t errlen, const char *fmt, ...)
{
  va_list ap;

  if (err == NULL || errlen == 0)
    return;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

int mcp_text_printable_span(const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
      return 0;
  return 1;
}

char *mcp_text_make_printable(char *s)
{
  for (char *p = s; *p != '\0'; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
      *p = '?';
  return s;
}

const char *mcp_text_escape(const char *s, size_t n, char *out, size_t outlen)
{
  size_t o = 0;

  if (outlen == 0)
    return out;
  for (size_t i = 0; i < n && s[i] != '\0'; i++) {
    unsigned char ch = (unsigned char)s[i];
    char esc[5];
    size_t k;

    if (ch >= 0x20 && ch <= 0x7e && ch != '\\') {
      esc[0] = (char)ch;
      k = 1;
    } else {
      k = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", ch);
    }
    if (o + k >= outlen)
      break;
    memcpy(out + o, esc, k);
    o += k;
  }
  out[o] = '\0';
  return out;
}
