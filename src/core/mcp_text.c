/*
 * mcp_text.c - the white-space trim every text reader in mcpnet shares (see text.h).
 * Kept apart from the parsers so that they cannot drift on what a space is. Also the
 * error-buffer writer that decoders and the doctor share instead of each their own.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mcpnet/text.h"

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
