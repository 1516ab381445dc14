/*
 * doctor_report.c - the report every step fills: findings with their level, section and
 * remedy, and the capture of what mcpnet_core logs while a step runs. A WARN the
 * plugin's own code prints during discovery is part of the diagnosis, so the doctor
 * collects it instead of letting it scroll past on stderr.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doctor.h"
#include "core/log.h"

void doctor_report_init(struct doctor_report *r, const struct doctor_opts *o)
{
  memset(r, 0, sizeof(*r));
  r->o = o;
  if (gethostname(r->host, sizeof(r->host) - 1) != 0 || r->host[0] == '\0' || strcmp(r->host, "(none)") == 0)
    snprintf(r->host, sizeof(r->host), "localhost");
  r->memlock_bytes = 0;
  r->own_rank = -1;
  r->shm_bytes = -1;
}

void doctor_report_free(struct doctor_report *r)
{
  int i;

  for (i = 0; i < r->ndev; i++) {
    for (int p = 0; p < r->dev[i].nport; p++)
      free(r->dev[i].port[p].gid);
    free(r->dev[i].port);
  }
  r->ndev = 0;
  for (i = 0; i < r->nsel; i++) {
    mcp_fabric_release(&r->sel[i]->fab);
    free(r->sel[i]);
  }
  r->nsel = 0;
  mcp_param_free(&r->cfg);
}

void doctor_add(struct doctor_report *r, enum doctor_level level, enum doctor_section section,
                const char *check, const char *subject, const char *remedy, const char *fmt, ...)
{
  struct doctor_finding *f;
  va_list ap;

  if (r->nfind == DOCTOR_MAX_FINDINGS) {
    /* Keep the worst: a FAIL replaces the last OK rather than being lost. */
    if (level != DOCTOR_FAIL || r->find[r->nfind - 1].level == DOCTOR_FAIL)
      return;
    r->nfind--;
  }
  f = &r->find[r->nfind++];
  memset(f, 0, sizeof(*f));
  f->level = level;
  f->section = section;
  snprintf(f->check, sizeof(f->check), "%s", check);
  snprintf(f->subject, sizeof(f->subject), "%s", subject != NULL ? subject : "");
  snprintf(f->remedy, sizeof(f->remedy), "%s", remedy != NULL ? remedy : "");
  va_start(ap, fmt);
  vsnprintf(f->message, sizeof(f->message), fmt, ap);
  va_end(ap);
}

int doctor_count(const struct doctor_report *r, enum doctor_level level)
{
  int i, n = 0;

  for (i = 0; i < r->nfind; i++)
    n += r->find[i].level == level;
  return n;
}

int doctor_exit_status(const struct doctor_report *r)
{
  return doctor_count(r, DOCTOR_FAIL) > 0 ? DOCTOR_EXIT_FAIL : DOCTOR_EXIT_OK;
}

const char *doctor_level_name(enum doctor_level level)
{
  return level == DOCTOR_FAIL ? "FAIL" : level == DOCTOR_WARN ? "WARN" : "OK";
}

const char *doctor_section_name(enum doctor_section section)
{
  static const char *names[DOCTOR_SEC_COUNT] = {"devices", "selection", "config", "host", "peer"};

  return section < DOCTOR_SEC_COUNT ? names[section] : "?";
}

/* ---- Log capture ----------------------------------------------------------------------- */

static struct {
  int verbose;
  char *buf;
  size_t len;
} cap;

static void capture_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                           const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  size_t used;

  const char *text = msg;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (strncmp(text, "NET/MCP ", 8) == 0)
    text += 8;
  if (cap.verbose && (level == NCCL_LOG_WARN || level == NCCL_LOG_INFO))
    fprintf(stderr, "mcpnet-doctor: [%s] %s\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", text);
  if (level != NCCL_LOG_WARN || cap.buf == NULL)
    return;
  used = strlen(cap.buf);
  if (used + 3 < cap.len)
    snprintf(cap.buf + used, cap.len - used, "%s%s", used > 0 ? "; " : "", text);
  (void)flags;
  (void)file;
  (void)line;
}

void doctor_log_setup(int verbose)
{
  cap.verbose = verbose;
  mcp_log_set_logger(capture_logger);
}

void doctor_log_capture(char *buf, size_t len)
{
  cap.buf = buf;
  cap.len = len;
  if (buf != NULL && len > 0)
    buf[0] = '\0';
}

void doctor_log_release(void)
{
  cap.buf = NULL;
  cap.len = 0;
}
