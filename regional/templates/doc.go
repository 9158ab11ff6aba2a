// Package templates owns campaign_templates: /v1/templates/campaigns, a
// discount or gift campaign's or a promotion tier's settings saved under a
// name (camp_tpl_…), and the campaigns and promotion tiers made from them
// (campaign-setup, tier-setup).
//
// A template keeps what makes its source again: the settings, the
// discount or gift, the voucher's code pattern and redemption limit, the
// dates and validity windows, the metadata, and a copy of each of its
// validation rules' definitions as they were when it was saved (so a later
// edit of the rule leaves the template alone; the products, collections,
// segments and locations those rules name stay shared within the project).
// It keeps no name, category or code count. A campaign or tier made from
// it is written by its owner (regional/vouchers, regional/promotions) with
// copies of the rules and, for a template copied from another project,
// the objects it carries (carry.go), all made and assigned in one
// transaction: a refused setup leaves nothing behind.
package templates
