/*
 * mcp_uverbs_ctl.c - mcp-uverbs-ctl: sends one fault command to the userspace verbs
 * device of a process (test/uverbs/uv_ctl.c lists the commands), prints its answer.
 *
 *   mcp-uverbs-ctl [--fabric DIR] PID COMMAND...
 *   mcp-uverbs-ctl 4242 link 4243 down      # cut the link between 4242 and 4243
 *   mcp-uverbs-ctl 4242 port 0 down         # take 4242's device mcpuv0 down
 *
 * The fabric folder is the processes' UVERBS_FABRIC (default /tmp/mcp-uverbs-UID).
 * Exit 0 when the device said "ok", 1 when it refused the command, 2 when it could not
 * be reached (no such process using the device, or another fabric folder).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  const char *fabric = getenv("UVERBS_FABRIC");
  char line[512] = "", reply[4096], def[64];
  size_t used = 0;
  int i = 1, fd, pid;
  ssize_t n;

  if (argc > 2 && strcmp(argv[1], "--fabric") == 0) {
    fabric = argv[2];
    i = 3;
  }
  if (argc - i < 2) {
    fprintf(stderr,
            "usage: mcp-uverbs-ctl [--fabric DIR] PID COMMAND...\n"
            "  commands: port DEV down|up, link PID|all down|up, drop PID|all PERCENT,\n"
            "            delay PID|all MS, qp QPN drop PERCENT, qp QPN delay MS, fatal DEV,\n"
            "            clear, status\n");
    return 2;
  }
  if (fabric == NULL || fabric[0] == '\0') {
    snprintf(def, sizeof(def), "/tmp/mcp-uverbs-%u", (unsigned)getuid());
    fabric = def;
  }
  pid = atoi(argv[i++]);
  for (; i < argc; i++)
    used += (size_t)snprintf(line + used, sizeof(line) - used, "%s%s", used ? " " : "", argv[i]);
  snprintf(line + used, sizeof(line) - used, "\n");
  snprintf(a.sun_path, sizeof(a.sun_path), "%s/ctl.%d.sock", fabric, pid);
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    fprintf(stderr, "mcp-uverbs-ctl: no userspace verbs device of process %d at %s\n", pid, a.sun_path);
    return 2;
  }
  if (send(fd, line, strlen(line), 0) < 0) {
    perror("mcp-uverbs-ctl: send");
    return 2;
  }
  used = 0;
  while (used + 1 < sizeof(reply) && (n = recv(fd, reply + used, sizeof(reply) - 1 - used, 0)) > 0)
    used += (size_t)n;
  reply[used] = '\0';
  close(fd);
  fputs(reply, stdout);
  return strncmp(reply, "ok", 2) == 0 ? 0 : 1;
}
