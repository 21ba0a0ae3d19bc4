// toxiproxy's own Go client (vendored unchanged in third_party/toxiproxy) driving a Roam run
// through `roam run --toxiproxy-port`. Builds offline: the client is its only dependency and
// comes from the directory below, not from the network.
module roam.example/toxiproxy-go

go 1.19

require github.com/Shopify/toxiproxy/v2 v2.12.0

replace github.com/Shopify/toxiproxy/v2 => ./third_party/toxiproxy
