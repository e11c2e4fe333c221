"""A TCP forwarder standing for a managed Redis's primary endpoint (the DNS
name or virtual IP a service moves to the new primary after a failover):
listens on 127.0.0.1 (an ephemeral port, printed as "listening on
http://127.0.0.1:PORT" first, as the tests' listen_port reads it) and
forwards each new connection to 127.0.0.1:N, N read from the file given as
argv[1] at that moment. A connection whose far side closes is closed.
Only loopback. Used by test_queue_failover.sh."""
import asyncio
import sys

TARGET = sys.argv[1]


async def pipe(r, w):
    try:
        while True:
            b = await r.read(65536)
            if not b:
                break
            w.write(b)
            await w.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            w.close()
        except Exception:
            pass


async def handle(cr, cw):
    try:
        port = int(open(TARGET).read().strip())
        ur, uw = await asyncio.open_connection("127.0.0.1", port)
    except (OSError, ValueError):
        cw.close()
        return
    await asyncio.gather(pipe(cr, uw), pipe(ur, cw))


async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(f"listening on http://127.0.0.1:{srv.sockets[0].getsockname()[1]}", flush=True)
    async with srv:
        await srv.serve_forever()


asyncio.run(main())
