module github.com/Shopify/toxiproxy/v2

go 1.19
