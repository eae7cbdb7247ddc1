"""Starts a bare (unprofiled) run of a torch.distributed script on this host:
launch_bare.py --nproc N -- SCRIPT [ARG...]
N processes of this Python run SCRIPT with RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, writing to
this process's stdout and stderr. Exits with the first non-zero status a rank
ends with (a rank killed by signal S counts as 128+S), after terminating the
others, which would otherwise wait in their next collective; 0 when all
succeed."""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(returncode):
    return 128 - returncode if returncode < 0 else returncode


def main():
    parser = argparse.ArgumentParser(usage="%(prog)s --nproc N -- SCRIPT [ARG...]")
    parser.add_argument("--nproc", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no SCRIPT given")

    port = str(free_port())
    ranks = []
    for rank in range(args.nproc):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.nproc), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(args.nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        ranks.append(subprocess.Popen([sys.executable, *command], env=env))

    failure = 0
    try:
        running = list(ranks)
        while running:
            for proc in list(running):
                if proc.poll() is None:
                    continue
                running.remove(proc)
                if proc.returncode and not failure:
                    failure = status(proc.returncode)
                    for other in running:
                        other.terminate()
            time.sleep(0.05)
    except KeyboardInterrupt:
        for proc in ranks:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in ranks:
            proc.wait()
        failure = failure or 128 + signal.SIGINT
    sys.exit(failure)


if __name__ == "__main__":
    main()
