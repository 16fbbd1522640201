"""A server that answers every HTTP/1.1 request at once with a tiny fixed response (raw asyncio + uvloop).

Used by the load-generator benchmarks: it measures the generator, not a model. Prints `listening on URL` and
serves until killed. Usage: python benchmarks/immediate_server.py [PORT]
"""

from __future__ import annotations

import asyncio
import sys

RESPONSE = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n{"outputs": []}'


class _Answer(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports do not subclass it

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            header = bytes(self.buffer[:end]).lower()
            at = header.find(b"content-length:")
            length = int(header[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            del self.buffer[: end + 4 + length]
            assert self.transport is not None
            self.transport.write(RESPONSE)


async def main(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Answer, "127.0.0.1", port, backlog=4096)
    print(f"listening on http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
