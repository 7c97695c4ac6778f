//! A minimal RESP2 client: enough to send any argument vector (binary-safe) and read
//! any reply, with errors kept as values so tests can compare them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

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
    pub fn connect(port: u16) -> std::io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        stream.set_write_timeout(Some(Duration::from_secs(30)))?;
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
                    let mut items = Vec::with_capacity(n as usize);
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

/// Build an argument vector from anything printable: `args!["RL.FIXED", key, 10, "1s"]`.
#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        vec![$(format!("{}", $a).into_bytes()),*] as Vec<Vec<u8>>
    };
}
