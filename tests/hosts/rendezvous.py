"""A rendezvous as torch.distributed's TCPStore makes one, without torch:
rank 0 listens on MASTER_PORT, every other rank connects to
MASTER_ADDR:MASTER_PORT and checks in with what it was given. Rank 0 writes
every rank's line to the file named by its argument. Exits 1 when a rank
cannot reach rank 0 within 30 s."""
import os
import socket
import sys
import time

env = {k: os.environ.get(k, "") for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
line = " ".join([socket.gethostname()] + [f"{k}={v}" for k, v in env.items()])
rank, world, port = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["MASTER_PORT"])
if rank == 0:
    server = socket.create_server(("", port))
    server.settimeout(30)
    lines = [line]
    for _ in range(world - 1):
        connection, _ = server.accept()
        with connection, connection.makefile() as stream:
            lines.append(stream.readline().strip())
    with open(sys.argv[1], "w") as out:
        out.write("\n".join(sorted(lines, key=lambda l: int(l.split("RANK=")[1].split()[0]))) + "\n")
else:
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection((env["MASTER_ADDR"], port), timeout=5) as connection:
                connection.sendall((line + "\n").encode())
            break
        except OSError as error:
            if time.monotonic() > deadline:
                print(f"rank {rank} cannot reach rank 0 at {env['MASTER_ADDR']}:{port}: {error}", file=sys.stderr)
                sys.exit(1)
            time.sleep(0.2)
