package products

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/bin"
	"github.com/tallyhq/tally/regional/webhooks"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/products")

// Notifier raises webhook notices in the writer's transaction.
type Notifier interface {
	Queue(ctx context.Context, b *pgx.Batch, n webhooks.Notice) error
	Listens(ctx context.Context, projectID, eventType string) bool
}

// Webhook event types.
const (
	ProductCreated = "product.created"
	ProductUpdated = "product.updated"
	ProductDeleted = "product.deleted"
	SKUCreated     = "sku.created"
	SKUUpdated     = "sku.updated"
	SKUDeleted     = "sku.deleted"
)

// MetadataSchemas checks the metadata a write leaves against the
// project's schema for its resource (metaschemas.Checker): 400
// metadata_validation_failed naming every failing key. Products are
// checked against the product schema; a SKU against one for "sku" when
// the project defines it (Tally's addition: the reference defines no SKU
// schema, and a product's required keys need not fit its variants).
type MetadataSchemas interface {
	CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error
	// Cells types an import's metadata cells of resource by its schema.
	Cells(ctx context.Context, projectID, resource string) (func(key, cell string) any, error)
}

// Service holds the product catalogue's rules.
type Service struct {
	pool   *db.Pool
	notify Notifier
	meta   MetadataSchemas
	clock  *clock.Clock
	wake   func()
	// reports holds the reports of PRODUCTS.BULK_UPDATE.
	reports async.Reports
}

// NewService returns the product service; it registers its jobs on reg,
// the bulk update's reports written by reports.
// How its resources leave the bin for good is RemoveBinnedProduct and
// RemoveBinnedSKU, the bin's Removers.
func NewService(pool *db.Pool, notify Notifier, meta MetadataSchemas, reg *async.Registry, clk *clock.Clock, reports async.Reports) *Service {
	s := &Service{pool: pool, notify: notify, meta: meta, clock: clk, wake: reg.Wake, reports: reports}
	reg.HandleJob(JobBulkUpdate, s.bulkUpdateJob)
	reg.HandleJob(JobMetadataUpdate, s.metadataUpdateJob)
	reg.HandleJob(JobImportProducts, s.importProductsJob)
	reg.HandleJob(JobImportSKUs, s.importSKUsJob)
	return s
}

func (s *Service) now() time.Time { return s.clock.Now() }

// checkMetadata checks the metadata md a write of resource leaves: a new
// one's always (its required keys), an existing one's when the patch
// sends metadata (the merged result).
func (s *Service) checkMetadata(ctx context.Context, projectID, resource string, patch Patch, md map[string]any, create bool) error {
	if _, sent := patch["metadata"]; !create && !sent {
		return nil
	}
	return s.meta.CheckMetadata(ctx, projectID, resource, md)
}

// emit sends the notices queued by fn in tx.
func (s *Service) emit(ctx context.Context, tx pgx.Tx, fn func(b *pgx.Batch) error) error {
	b := &pgx.Batch{}
	if err := fn(b); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

func duplicateProduct(err error) error {
	if errors.Is(err, db.ErrConflict) {
		return apierr.Duplicate("product", "A product with this source_id already exists; delete it or pick another source_id.")
	}
	return err
}

func duplicateSKU(err error) error {
	if errors.Is(err, db.ErrConflict) {
		return apierr.Duplicate("sku", "A SKU with this source_id already exists in the catalogue; pick another source_id.")
	}
	return err
}

// view renders products with their embedded SKUs.
func (s *Service) views(ctx context.Context, q db.Querier, projectID string, ps []Product) ([]View, error) {
	idList := make([]string, len(ps))
	for i, p := range ps {
		idList[i] = p.ID
	}
	skus, totals, err := embeddedSKUs(ctx, q, projectID, idList, EmbeddedSKUs)
	if err != nil {
		return nil, err
	}
	out := make([]View, len(ps))
	for i, p := range ps {
		out[i] = p.View(skus[p.ID], totals[p.ID])
	}
	return out, nil
}

func (s *Service) view(ctx context.Context, q db.Querier, projectID string, p Product) (View, error) {
	vs, err := s.views(ctx, q, projectID, []Product{p})
	if err != nil {
		return View{}, err
	}
	return vs[0], nil
}

// CreateProduct makes a product; its source_id must be free among the
// project's live products.
func (s *Service) CreateProduct(ctx context.Context, projectID string, patch Patch) (_ View, err error) {
	ctx, span := tracer.Start(ctx, "products.CreateProduct")
	defer telemetry.End(span, &err)
	p, err := s.newProduct(ctx, projectID, ids.New("prod_"), patch)
	if err != nil {
		return View{}, err
	}
	var v View
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		v, err = s.writeProduct(ctx, tx, projectID, p)
		return err
	})
	return v, err
}

// CreateProductIn makes a product with the id given in the caller's
// transaction, its webhook notice with it: what a campaign template
// copied from another project carries is made in the transaction of the
// campaign or tier set up from it (regional/templates), so that a refused
// setup leaves none of it behind.
func (s *Service) CreateProductIn(ctx context.Context, tx pgx.Tx, projectID, id string, patch Patch) (View, error) {
	p, err := s.newProduct(ctx, projectID, id, patch)
	if err != nil {
		return View{}, err
	}
	return s.writeProduct(ctx, tx, projectID, p)
}

// newProduct is the product a create body makes, checked.
func (s *Service) newProduct(ctx context.Context, projectID, id string, patch Patch) (Product, error) {
	p := Product{ID: id, CreatedAt: s.now()}
	if err := patch.noID(); err != nil {
		return p, err
	}
	if err := patch.ApplyProduct(&p); err != nil {
		return p, err
	}
	return p, s.checkMetadata(ctx, projectID, "product", patch, p.Metadata, true)
}

func (s *Service) writeProduct(ctx context.Context, tx pgx.Tx, projectID string, p Product) (View, error) {
	if err := insertProduct(ctx, tx, projectID, p); err != nil {
		return View{}, duplicateProduct(err)
	}
	v := p.View(nil, 0)
	return v, s.emit(ctx, tx, func(b *pgx.Batch) error {
		return s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: ProductCreated, Entity: p.ID, Object: v})
	})
}

// GetProduct returns a live product by id or source_id.
func (s *Service) GetProduct(ctx context.Context, projectID, ref string) (View, error) {
	var v View
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		p, err := s.product(ctx, tx, projectID, ref, false)
		if err != nil {
			return err
		}
		v, err = s.view(ctx, tx, projectID, p)
		return err
	})
	return v, err
}

func (s *Service) product(ctx context.Context, q db.Querier, projectID, ref string, lock bool) (Product, error) {
	p, err := getProduct(ctx, q, projectID, ref, lock)
	if errors.Is(err, db.ErrNotFound) {
		return Product{}, apierr.NotFound("product", ref)
	}
	return p, err
}

// UpdateProduct changes the properties the patch names.
func (s *Service) UpdateProduct(ctx context.Context, projectID, ref string, patch Patch) (_ View, err error) {
	ctx, span := tracer.Start(ctx, "products.UpdateProduct")
	defer telemetry.End(span, &err)
	if err := patch.ApplyProduct(&Product{}); err != nil { // a bad body is a 400 even for an unknown product
		return View{}, err
	}
	var v View
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		p, err := s.product(ctx, tx, projectID, ref, true)
		if err != nil {
			return err
		}
		if err := patch.ApplyProduct(&p); err != nil {
			return err
		}
		if err := s.checkMetadata(ctx, projectID, "product", patch, p.Metadata, false); err != nil {
			return err
		}
		now := s.now()
		p.UpdatedAt = &now
		if err := updateProduct(ctx, tx, projectID, p); err != nil {
			return err
		}
		if v, err = s.view(ctx, tx, projectID, p); err != nil {
			return err
		}
		return s.emit(ctx, tx, func(b *pgx.Batch) error {
			return s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: ProductUpdated, Entity: p.ID, Object: v})
		})
	})
	return v, duplicateProduct(err)
}

// ListProducts returns a page of live products (limit+1 rows) and how many
// the project has.
func (s *Service) ListProducts(ctx context.Context, projectID string, lq ListQuery) (out []View, total int, err error) {
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		ps, n, err := listProducts(ctx, tx, projectID, lq)
		if err != nil {
			return err
		}
		total = n
		out, err = s.views(ctx, tx, projectID, ps)
		return err
	})
	return out, total, err
}

// DeleteProduct deletes a product and all its SKUs in one transaction:
// into the bin (their source_ids free at once), or with force for good.
func (s *Service) DeleteProduct(ctx context.Context, projectID, ref string, force bool) (err error) {
	ctx, span := tracer.Start(ctx, "products.DeleteProduct")
	defer telemetry.End(span, &err)
	// The SKUs are read back only for their notices, when someone gets them.
	returning := s.notify.Listens(ctx, projectID, SKUDeleted)
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		p, err := s.product(ctx, tx, projectID, ref, true)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		var skus []SKU
		if force {
			// The live SKUs, read back for their notices; removeProduct
			// takes those in the bin.
			sql := `DELETE FROM skus WHERE project_id = $1 AND product_id = $2`
			if returning {
				sql += ` RETURNING ` + skuColumns
			}
			skus, err = collectSKUs(tx.Query(ctx, sql, projectID, p.ID))
			removeProduct(b, projectID, p.ID)
		} else {
			// One bin entry holds the product and the SKUs that go with it.
			e := bin.Entry{ID: bin.NewID(), ResourceType: "product", ResourceID: p.ID, ResourceName: p.Name, CreatedAt: s.now()}
			skus, err = binSKUs(ctx, tx, "product_id = $2", returning, projectID, p.ID, e.ID)
			b.Queue(`UPDATE products SET bin_id = $3 WHERE project_id = $1 AND id = $2`, projectID, p.ID, e.ID)
			bin.Put(b, projectID, []bin.Entry{e})
		}
		if err != nil {
			return err
		}
		if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: ProductDeleted, Entity: p.ID,
			Object: p.View(nil, 0)}); err != nil {
			return err
		}
		for _, k := range skus {
			if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: SKUDeleted, Entity: k.ID,
				Object: k.View()}); err != nil {
				return err
			}
		}
		return tx.SendBatch(ctx, b).Close()
	})
}

// removeProduct queues the statements that delete a product for good with
// its binned SKUs and their bin entries. Its live SKUs are the caller's to
// delete first: a binned product has none (a SKU is only added to a live
// product, under its lock), and the skus foreign key would refuse the
// product's deletion if one were left.
func removeProduct(b *pgx.Batch, projectID, productID string) {
	b.Queue(`DELETE FROM binned_skus WHERE project_id = $1 AND product_id = $2`, projectID, productID)
	bin.QueueDropChildren(b, projectID, "sku", productID)
	b.Queue(`DELETE FROM products WHERE project_id = $1 AND id = $2`, projectID, productID)
}

// RemoveBinnedProduct is the bin's Remover of products.
func (s *Service) RemoveBinnedProduct(ctx context.Context, tx pgx.Tx, projectID string, e bin.Entry) error {
	b := &pgx.Batch{}
	removeProduct(b, projectID, e.ResourceID)
	return tx.SendBatch(ctx, b).Close()
}

// RemoveBinnedSKU is the bin's Remover of SKUs.
func (s *Service) RemoveBinnedSKU(ctx context.Context, tx pgx.Tx, projectID string, e bin.Entry) error {
	_, err := tx.Exec(ctx, `DELETE FROM binned_skus WHERE project_id = $1 AND id = $2 AND bin_id = $3`, projectID, e.ResourceID, e.ID)
	return err
}

// CreateSKU adds a SKU to a live product.
func (s *Service) CreateSKU(ctx context.Context, projectID, productRef string, patch Patch) (_ SKUView, err error) {
	ctx, span := tracer.Start(ctx, "products.CreateSKU")
	defer telemetry.End(span, &err)
	k, err := s.newSKU(ctx, projectID, ids.New("sku_"), patch)
	if err != nil {
		return SKUView{}, err
	}
	var v SKUView
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		v, err = s.writeSKU(ctx, tx, projectID, productRef, k)
		return err
	})
	return v, err
}

// CreateSKUIn adds a SKU with the id ref.SKU to the live product
// ref.Product in the caller's transaction (as CreateProductIn).
func (s *Service) CreateSKUIn(ctx context.Context, tx pgx.Tx, ref SKURef, patch Patch) (SKUView, error) {
	k, err := s.newSKU(ctx, ref.Project, ref.SKU, patch)
	if err != nil {
		return SKUView{}, err
	}
	return s.writeSKU(ctx, tx, ref.Project, ref.Product, k)
}

// newSKU is the SKU a create body makes, checked.
func (s *Service) newSKU(ctx context.Context, projectID, id string, patch Patch) (SKU, error) {
	k := SKU{ID: id, CreatedAt: s.now()}
	if err := patch.noID(); err != nil {
		return k, err
	}
	if err := patch.ApplySKU(&k); err != nil {
		return k, err
	}
	return k, s.checkMetadata(ctx, projectID, "sku", patch, k.Metadata, true)
}

func (s *Service) writeSKU(ctx context.Context, tx pgx.Tx, projectID, productRef string, k SKU) (SKUView, error) {
	// The product's row lock keeps it out of the bin until this commits.
	p, err := s.product(ctx, tx, projectID, productRef, true)
	if err != nil {
		return SKUView{}, err
	}
	k.ProductID = p.ID
	if err := insertSKU(ctx, tx, projectID, k); err != nil {
		return SKUView{}, duplicateSKU(err)
	}
	v := k.View()
	return v, s.emit(ctx, tx, func(b *pgx.Batch) error {
		return s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: SKUCreated, Entity: k.ID, Object: v})
	})
}

// SKURef names a SKU the way a request's path does: in a project, by SKU
// (its id or source_id) and, when the path names one, Product (an id or
// source_id), the product it must belong to.
type SKURef struct {
	Project, Product, SKU string
}

// sku finds the live SKU ref names.
func (s *Service) sku(ctx context.Context, q db.Querier, ref SKURef, lock bool) (SKU, error) {
	var productID string
	if ref.Product != "" {
		p, err := s.product(ctx, q, ref.Project, ref.Product, false)
		if err != nil {
			return SKU{}, err
		}
		productID = p.ID
	}
	k, err := getSKU(ctx, q, ref.Project, ref.SKU, lock)
	if errors.Is(err, db.ErrNotFound) || (err == nil && productID != "" && k.ProductID != productID) {
		return SKU{}, apierr.NotFound("sku", ref.SKU)
	}
	return k, err
}

// GetSKU returns a live SKU by id or source_id.
func (s *Service) GetSKU(ctx context.Context, projectID, ref string) (SKUView, error) {
	k, err := s.sku(ctx, s.pool, SKURef{Project: projectID, SKU: ref}, false)
	return k.View(), err
}

// UpdateSKU changes the properties the patch names.
func (s *Service) UpdateSKU(ctx context.Context, ref SKURef, patch Patch) (_ SKUView, err error) {
	projectID := ref.Project
	ctx, span := tracer.Start(ctx, "products.UpdateSKU")
	defer telemetry.End(span, &err)
	if err := patch.ApplySKU(&SKU{}); err != nil {
		return SKUView{}, err
	}
	var v SKUView
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		k, err := s.sku(ctx, tx, ref, true)
		if err != nil {
			return err
		}
		if err := patch.ApplySKU(&k); err != nil {
			return err
		}
		if err := s.checkMetadata(ctx, projectID, "sku", patch, k.Metadata, false); err != nil {
			return err
		}
		now := s.now()
		k.UpdatedAt = &now
		if err := updateSKU(ctx, tx, projectID, k); err != nil {
			return err
		}
		v = k.View()
		return s.emit(ctx, tx, func(b *pgx.Batch) error {
			return s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: SKUUpdated, Entity: k.ID, Object: v})
		})
	})
	return v, duplicateSKU(err)
}

// DeleteSKU deletes one SKU of a product: into the bin, or with force for good.
func (s *Service) DeleteSKU(ctx context.Context, ref SKURef, force bool) (err error) {
	ctx, span := tracer.Start(ctx, "products.DeleteSKU")
	defer telemetry.End(span, &err)
	projectID := ref.Project
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		k, err := s.sku(ctx, tx, ref, true)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		if force {
			b.Queue(`DELETE FROM skus WHERE project_id = $1 AND id = $2`, projectID, k.ID)
		} else {
			e := bin.Entry{ID: bin.NewID(), ResourceType: "sku", ResourceID: k.ID, ResourceName: k.SKU, ParentID: &k.ProductID,
				CreatedAt: s.now()}
			if _, err := binSKUs(ctx, tx, "id = $2", false, projectID, k.ID, e.ID); err != nil {
				return err
			}
			bin.Put(b, projectID, []bin.Entry{e})
		}
		if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: SKUDeleted, Entity: k.ID,
			Object: k.View()}); err != nil {
			return err
		}
		return tx.SendBatch(ctx, b).Close()
	})
}

// ListSKUs returns a page (limit+1 rows) of a live product's SKUs and how
// many it has.
func (s *Service) ListSKUs(ctx context.Context, projectID, productRef string, lq listq.Query) (out []SKU, total int, err error) {
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		p, err := s.product(ctx, tx, projectID, productRef, false)
		if err != nil {
			return err
		}
		out, total, err = listSKUs(ctx, tx, projectID, p.ID, lq)
		return err
	})
	return out, total, err
}
