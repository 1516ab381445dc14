/*
 * text.h - the one white-space trim used wherever mcpnet reads text it was given
 * (parameter values, KEY=VALUE files, the rank map, NCCL's device and interface
 * lists), so "what counts as a space" is decided in one place; the one writer of a
 * caller's optional error buffer (the wire decoder, the doctor's rank-map suggestion);
 * and the one rule for logging text that came from another host.
 */
#ifndef MCPNET_TEXT_H
#define MCPNET_TEXT_H

#include <stddef.h>

/* Narrows the span [*s, *s + *n) past leading and trailing white space (isspace);
 * returns the new length. Nothing is written: the text may be read-only. */
size_t mcp_trim_span(const char **s, size_t *n);
/* In place: returns s advanced past leading white space, trailing white space cut. */
char *mcp_trim_inplace(char *s);
/* Formats into err[errlen], cut to fit; does nothing when err is NULL or errlen is 0,
 * so a caller that does not want the reason passes NULL. */
void mcp_text_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Text that came from another host is logged only as printable ASCII (0x20..0x7e), so a
 * peer cannot forge log lines with a newline or hide text with control characters. The
 * wire refuses strings with other bytes (printable_span tells), senders replace them in
 * their own text before it goes out (make_printable: '?' in place), and text from
 * elsewhere (the doctor's protocol) is escaped into out as \xHH (escape, cut to fit). */
int mcp_text_printable_span(const char *s, size_t n);
char *mcp_text_make_printable(char *s);
const char *mcp_text_escape(const char *s, size_t n, char *out, size_t outlen);

#endif
