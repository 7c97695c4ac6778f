//! A minimal RESP2 client: enough to send any argument vector (binary-safe) and read
//! any reply, with error replies kept as values so callers can compare or report them.
//! The integration tests use it (through `tests/common`), and so does the
//! `ratelimit-sweep` tool. The accessors that panic on an unexpected reply
//! (`int`, `ints`, `array`, `text`), `cmd` and `pipeline` are for tests; programs use
//! `try_cmd` and match on [`Value`].

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The longest bulk string accepted (the server's default `proto-max-bulk-len`).
const MAX_BULK: i64 = 512 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Status(String),
    Error(String),
    Array(Vec<Value>),
}

impl Value {
    pub fn int(&self) -> i64 {
        match self {
            Value::Int(i) => *i,
            other => panic!("expected an integer reply, got {other:?}"),
        }
    }

    pub fn ints(&self) -> Vec<i64> {
        match self {
            Value::Array(items) => items.iter().map(Value::int).collect(),
            other => panic!("expected an array of integers, got {other:?}"),
        }
    }

    pub fn array(&self) -> &[Value] {
        match self {
            Value::Array(items) => items,
            other => panic!("expected an array, got {other:?}"),
        }
    }

    /// The text of a bulk or status reply.
    pub fn text(&self) -> String {
        match self {
            Value::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            Value::Status(s) => s.clone(),
            other => panic!("expected a string reply, got {other:?}"),
        }
    }

    pub fn err(&self) -> Option<&str> {
        match self {
            Value::Error(e) => Some(e),
            _ => None,
        }
    }

    pub fn is_err(&self) -> bool {
        matches!(self, Value::Error(_))
    }
}

pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    /// Connect to a server on 127.0.0.1.
    pub fn connect(port: u16) -> std::io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        Client::from_stream(stream, Duration::from_secs(30))
    }

    /// Connect to `host:port` (a name or an address), giving up after `timeout` per
    /// address; reads and writes time out after `io_timeout`.
    pub fn connect_to(
        host: &str,
        port: u16,
        timeout: Duration,
        io_timeout: Duration,
    ) -> std::io::Result<Client> {
        let mut last = std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no address found for {host}"),
        );
        for addr in (host, port).to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(stream) => return Client::from_stream(stream, io_timeout),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn from_stream(stream: TcpStream, io_timeout: Duration) -> std::io::Result<Client> {
        stream.set_read_timeout(Some(io_timeout))?;
        stream.set_write_timeout(Some(io_timeout))?;
        stream.set_nodelay(true)?;
        Ok(Client {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    /// Send one command and read its reply.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Value {
        self.try_cmd(args)
            .unwrap_or_else(|e| panic!("connection error: {e}"))
    }

    /// Read the next value the server sends without sending anything (pushed
    /// messages on a subscribed connection).
    pub fn read(&mut self) -> std::io::Result<Value> {
        self.read_value()
    }

    pub fn try_cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> std::io::Result<Value> {
        self.writer.write_all(&encode(args))?;
        self.read_value()
    }

    /// Send several commands at once, then read all the replies.
    pub fn pipeline(&mut self, cmds: &[Vec<Vec<u8>>]) -> Vec<Value> {
        let mut buf = Vec::new();
        for c in cmds {
            buf.extend_from_slice(&encode(c));
        }
        self.writer.write_all(&buf).expect("write");
        (0..cmds.len())
            .map(|_| self.read_value().expect("read"))
            .collect()
    }

    fn read_line(&mut self) -> std::io::Result<String> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line)?;
        if line.len() < 2 || !line.ends_with(b"\r\n") {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        line.truncate(line.len() - 2);
        Ok(String::from_utf8_lossy(&line).into_owned())
    }

    fn read_value(&mut self) -> std::io::Result<Value> {
        let line = self.read_line()?;
        let (kind, rest) = line.split_at(1);
        let bad = || {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("bad reply line {line:?}"),
            )
        };
        Ok(match kind {
            "+" => Value::Status(rest.to_string()),
            "-" => Value::Error(rest.to_string()),
            ":" => Value::Int(rest.parse().map_err(|_| bad())?),
            "$" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n > MAX_BULK {
                    return Err(bad());
                }
                if n < 0 {
                    Value::Nil
                } else {
                    let mut data = vec![0; n as usize + 2];
                    self.reader.read_exact(&mut data)?;
                    data.truncate(n as usize);
                    Value::Bulk(data)
                }
            }
            "*" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n < 0 {
                    Value::Nil
                } else {
                    // The length is the peer's word: allocate as items arrive.
                    let mut items = Vec::with_capacity((n as usize).min(1024));
                    for _ in 0..n {
                        items.push(self.read_value()?);
                    }
                    Value::Array(items)
                }
            }
            _ => return Err(bad()),
        })
    }
}

pub fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A one-shot fake server on 127.0.0.1 that answers with `reply` once it has read
    /// `expect` (what the client must have sent).
    fn fake(expect: Vec<u8>, reply: &'static [u8]) -> (u16, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let handle = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut got = vec![0; expect.len()];
            s.read_exact(&mut got).expect("read request");
            assert_eq!(got, expect);
            s.write_all(reply).expect("write reply");
        });
        (port, handle)
    }

    #[test]
    fn encodes_binary_safe_arguments() {
        assert_eq!(
            encode(&[&b"SET"[..], b"k\r\n", b""]),
            b"*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$0\r\n\r\n".to_vec()
        );
    }

    #[test]
    fn reads_every_reply_type() {
        let reply: &[u8] = b"*6\r\n+OK\r\n-ERR no\r\n:-7\r\n$3\r\na\r\n\r\n$-1\r\n*1\r\n*0\r\n";
        let (port, server) = fake(encode(&["PING"]), reply);
        let mut c = Client::connect_to(
            "127.0.0.1",
            port,
            Duration::from_secs(5),
            Duration::from_secs(5),
        )
        .expect("connect");
        let v = c.try_cmd(&["PING"]).expect("reply");
        server.join().expect("fake server");
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Status("OK".into()),
                Value::Error("ERR no".into()),
                Value::Int(-7),
                Value::Bulk(b"a\r\n".to_vec()),
                Value::Nil,
                Value::Array(vec![Value::Array(vec![])]),
            ])
        );
    }

    #[test]
    fn bad_or_cut_replies_are_errors_not_panics() {
        for reply in [
            &b"?what\r\n"[..],
            b":12x\r\n",
            b"$999999999999\r\n",
            b"*2\r\n:1\r\n",
            b"",
        ] {
            let (port, server) = fake(encode(&["PING"]), reply);
            let mut c = Client::connect_to(
                "127.0.0.1",
                port,
                Duration::from_secs(5),
                Duration::from_secs(5),
            )
            .expect("connect");
            let r = c.try_cmd(&["PING"]);
            server.join().expect("fake server");
            assert!(
                r.is_err(),
                "{:?} gave {r:?}",
                String::from_utf8_lossy(reply)
            );
        }
    }
}
