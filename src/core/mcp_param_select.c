/*
 * mcp_param_select.c - whether NCCL, given this environment, loads mcpnet and uses it.
 * Two variables decide before mcpnet runs any code, so mcpnet's own init cannot say
 * they are wrong: NCCL_NET_PLUGIN names the library NCCL opens (NCCL_NET_PLUGIN=mpc
 * opens libnccl-net-mpc.so, finds nothing, and NCCL goes on with its own transports
 * without a WARN), and NCCL_NET names the one network NCCL initialises (NCCL_NET=IB
 * never calls mcpnet's init; a misspelt name fails every communicator). The rules are
 * those of NCCL's plugin loader (src/plugin/net.cc and plugin_open.cc): 2.20 to 2.25
 * open libnccl-net-NAME.so; 2.26 tries NAME as given first, so a library name or path
 * works too; 2.27 takes a comma list and "none"; NCCL_NET is compared ignoring case.
 * mcpnet-params --check runs this before a job; the plugin does not.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/param.h"

extern char **environ;

#define MCP_PLUGIN_NAME "mcp"
#define MCP_PLUGIN_LIB "libnccl-net-mcp.so"
#define MCP_NET_NAME "MCP"

/* The value of name in env->envp (or environ), NULL when unset or empty (NCCL's unset). */
static const char *env_value(const struct mcp_param_env *env, const char *name)
{
  char *const *envp = env != NULL && env->envp != NULL ? env->envp : environ;
  size_t len = strlen(name);

  for (; envp != NULL && *envp != NULL; envp++)
    if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=')
      return (*envp)[len + 1] != '\0' ? *envp + len + 1 : NULL;
  return NULL;
}

static void say(const struct mcp_param_env *env, enum mcp_param_finding_kind kind, bool problem,
                const char *name, const char *value, const char *nearest, const char *msg)
{
  struct mcp_param_finding f = {kind, problem, name, value, nearest, msg};

  mcp_param_report(env, problem || kind != MCP_FIND_NOTE ? NCCL_LOG_WARN : NCCL_LOG_INFO, msg);
  mcp_param_found(env, &f);
}

/* A slip of the fingers on want: one edit, the same letters in another order, or want
 * with something around it (mcpnet, MCP_NET). */
static bool looks_like(const char *word, const char *want)
{
  const char *const cands[] = {want, NULL};
  size_t n = strlen(word), m = strlen(want);
  int d;

  mcp_param_nearest_word(word, cands, &d);
  if (d == 1 || strcasestr(word, want) != NULL)
    return true;
  if (n != m)
    return false;
  for (size_t i = 0; i < m; i++) { /* an anagram: every letter of want, as often */
    size_t in_word = 0, in_want = 0;

    for (size_t j = 0; j < n; j++) {
      in_word += (word[j] | 0x20) == (want[i] | 0x20);
      in_want += (want[j] | 0x20) == (want[i] | 0x20);
    }
    if (in_word != in_want)
      return false;
  }
  return true;
}

/* The library NCCL 2.26+ opens for one element: itself when it is a path or a library
 * name, else libnccl-net-ELEMENT.so (what every release opens for a plain name). */
static void lib_of(const char *elem, char *lib, size_t len)
{
  size_t n = strlen(elem);
  bool named = strncmp(elem, "lib", 3) == 0 && n >= 3 && strcmp(elem + n - 3, ".so") == 0;

  if (strchr(elem, '/') != NULL || named)
    snprintf(lib, len, "%s", elem);
  else
    snprintf(lib, len, "libnccl-net-%s.so", elem);
}

/* The plugin's own name inside a library name or path: "mpc" in libnccl-net-mpc.so. */
static void stem_of(const char *lib, char *stem, size_t len)
{
  const char *base = strrchr(lib, '/');
  size_t n;

  base = base != NULL ? base + 1 : lib;
  if (strncmp(base, "libnccl-net-", 12) == 0)
    base += 12;
  snprintf(stem, len, "%s", base);
  n = strlen(stem);
  if (n > 3 && strcmp(stem + n - 3, ".so") == 0)
    stem[n - 3] = '\0';
}

/* 1: NCCL opens mcpnet for this element; 0: another plugin; -EINVAL: a slip of mcp (reported). */
static int judge_element(const struct mcp_param_env *env, const char *value, const char *elem)
{
  char lib[512], stem[512], msg[1400];
  const char *base = strrchr(elem, '/');

  lib_of(elem, lib, sizeof(lib));
  base = base != NULL ? base + 1 : lib;
  if (strcmp(elem, MCP_PLUGIN_NAME) == 0 || strcmp(base, MCP_PLUGIN_LIB) == 0) {
    if (strchr(elem, '/') != NULL && access(elem, R_OK) != 0) {
      snprintf(msg, sizeof(msg),
               "NCCL_NET_PLUGIN=%s: %s does not exist here, so NCCL cannot open it and runs without "
               "mcpnet; NCCL_NET_PLUGIN=mcp finds the plugin on the library path",
               value, elem);
      say(env, MCP_FIND_PLUGIN, true, "NCCL_NET_PLUGIN", value, MCP_PLUGIN_NAME, msg);
      return -EINVAL;
    }
    return 1;
  }
  stem_of(lib, stem, sizeof(stem));
  if (!looks_like(stem, MCP_PLUGIN_NAME))
    return 0;
  snprintf(msg, sizeof(msg),
           "NCCL_NET_PLUGIN=%s: NCCL opens %s, not mcpnet's %s, and without a WARN goes on with its own "
           "transports; did you mean mcp?",
           value, lib, MCP_PLUGIN_LIB);
  say(env, MCP_FIND_PLUGIN, true, "NCCL_NET_PLUGIN", value, MCP_PLUGIN_NAME, msg);
  return -EINVAL;
}

static int check_plugin(const struct mcp_param_env *env)
{
  const char *value = env_value(env, "NCCL_NET_PLUGIN");
  char list[1024], msg[1200], others[600] = "";
  int mine = 0, slips = 0, before = 0;
  bool several;
  char *save = NULL;

  if (value == NULL) {
    say(env, MCP_FIND_NOTE, false, "NCCL_NET_PLUGIN", NULL, MCP_PLUGIN_NAME,
        "NCCL_NET_PLUGIN is not set: NCCL opens libnccl-net.so, which is mcpnet only where that name "
        "is a link to libnccl-net-mcp.so; set NCCL_NET_PLUGIN=mcp in the image");
    return 0;
  }
  if (strcasecmp(value, "none") == 0) {
    say(env, MCP_FIND_PLUGIN, true, "NCCL_NET_PLUGIN", value, MCP_PLUGIN_NAME,
        "NCCL_NET_PLUGIN=none: NCCL 2.27 and later load no plugin at all, so mcpnet never runs; "
        "NCCL_NET_PLUGIN=mcp selects it");
    return 1;
  }
  snprintf(list, sizeof(list), "%s", value);
  several = strchr(list, ',') != NULL;
  for (char *elem = strtok_r(list, ",", &save); elem != NULL; elem = strtok_r(NULL, ",", &save)) {
    int r = judge_element(env, value, elem);

    if (r > 0 && mine++ == 0)
      before = others[0] != '\0';
    if (r < 0)
      slips++;
    if (r == 0) {
      char lib[512];

      lib_of(elem, lib, sizeof(lib));
      if (strlen(others) + strlen(lib) + 3 < sizeof(others))
        snprintf(others + strlen(others), sizeof(others) - strlen(others), "%s%s", others[0] ? ", " : "",
                 lib);
    }
  }
  if (mine == 0 && slips == 0) {
    snprintf(msg, sizeof(msg),
             "NCCL_NET_PLUGIN=%s names no mcpnet: NCCL loads %s, and mcpnet's settings here have no "
             "effect; NCCL_NET_PLUGIN=mcp selects mcpnet",
             value, others);
    say(env, MCP_FIND_PLUGIN, true, "NCCL_NET_PLUGIN", value, MCP_PLUGIN_NAME, msg);
    return 1;
  }
  if (mine > 0 && before) {
    snprintf(msg, sizeof(msg),
             "NCCL_NET_PLUGIN=%s: NCCL tries %s before mcpnet and uses the first that loads and "
             "initialises",
             value, others);
    say(env, MCP_FIND_NOTE, false, "NCCL_NET_PLUGIN", value, NULL, msg);
  }
  if (mine > 0 && several) {
    snprintf(msg, sizeof(msg),
             "NCCL_NET_PLUGIN=%s is a list, which NCCL 2.27 and later read; NCCL 2.20 to 2.26 take it "
             "as one name and find no plugin",
             value);
    say(env, MCP_FIND_NOTE, false, "NCCL_NET_PLUGIN", value, NULL, msg);
  }
  return slips;
}

static int check_net(const struct mcp_param_env *env)
{
  static const char *const nets[] = {MCP_NET_NAME, "IB", "Socket", NULL};
  const char *value = env_value(env, "NCCL_NET");
  char msg[1200];

  if (value == NULL || strcasecmp(value, MCP_NET_NAME) == 0)
    return 0; /* unset: NCCL tries mcpnet first and falls back; MCP: mcpnet or nothing */
  if (strcasecmp(value, "IB") == 0 || strcasecmp(value, "Socket") == 0) {
    snprintf(msg, sizeof(msg),
             "NCCL_NET=%s selects NCCL's own %s transport: NCCL never initialises mcpnet. NCCL_NET=MCP "
             "selects mcpnet; unset, NCCL tries mcpnet first",
             value, value);
    say(env, MCP_FIND_NET, true, "NCCL_NET", value, MCP_NET_NAME, msg);
    return 1;
  }
  if (looks_like(value, MCP_NET_NAME)) {
    snprintf(msg, sizeof(msg),
             "NCCL_NET=%s names no network NCCL has: it initialises none, and every communicator fails "
             "with 'Failed to initialize any NET plugin'; did you mean MCP?",
             value);
    say(env, MCP_FIND_NET, true, "NCCL_NET", value, MCP_NET_NAME, msg);
    return 1;
  }
  snprintf(msg, sizeof(msg),
           "NCCL_NET=%s is not mcpnet's network (%s, or %s, %s for NCCL's own): NCCL initialises only a "
           "network named %s and never mcpnet; with no plugin of that name, every communicator fails",
           value, nets[0], nets[1], nets[2], value);
  say(env, MCP_FIND_NET, true, "NCCL_NET", value, NULL, msg);
  return 1;
}

int mcp_param_check_select(const struct mcp_param_env *env) { return check_plugin(env) + check_net(env); }
